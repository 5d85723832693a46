"""``--target gguf`` and ``--target gguf-lora``: a run as llama.cpp runs it, written by llama.cpp's own tools and
checked through llama.cpp's own runtime.

    gguf       the merged model (QLoRA: merged into the dequantized base) saved as a transformers directory, converted
               by llama.cpp's ``convert_hf_to_gguf.py`` to an f16 GGUF, quantized by ``llama-quantize`` (q8_0,
               q4_k_m); a GLM-4.1V run's vision projector converted beside it (``convert_hf_to_gguf.py --mmproj``:
               ``mmproj-f16.gguf``); an Ollama ``Modelfile`` written beside them
    gguf-lora  the adapter alone (``convert_lora_to_gguf.py``) over the f16 GGUF of the base: one base file, many
               adapters

The scripts and binaries are the set-up's (``bash scripts/setup.sh --llama-cpp``: llama-cpp-python 0.3.36's vendored
llama.cpp, ``serve.llama_cpp``). Parity is measured through llama-server: for each answer position of the held-out
rows, teacher-forced (the prompt is the row's tokens up to it, as token ids), llama-server's top log-probabilities of
the next token (``/completion`` with ``n_probs``, before sampling) against the reference's.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from ..data.tokenize import IGNORE_INDEX
from ..serve.llama_cpp import LlamaCpp, find_llama_cpp
from .parity import ActionRow, ParityGate, ParityReport, ReferenceActions, action_parity
from .targets import PROCESSOR_FILES, save_tokenizer_files

MMPROJ_FILE = "mmproj-f16.gguf"
LORA_FILE = "adapter-f16.gguf"
MODELFILE = "Modelfile"
TOP_LOGPROBS = 20  # llama-server's top log-probabilities per position parity compares
# Ollama's context for a phone agent: what vLLM is started with for AutoGLM-Phone-9B (or the model's own, when shorter)
OLLAMA_CONTEXT = 25480


def gguf_file(out: Path, quant: str) -> Path:
    return out / f"model-{quant}.gguf"


def mmproj_file(out: Path) -> Path | None:
    """The export's vision projector GGUF (a GLM-4.1V run's), None for a text model's export."""
    path = out / MMPROJ_FILE
    return path if path.is_file() else None


class LlamaCppFailed(RuntimeError):
    """One of llama.cpp's tools exited with an error; the message ends with its last output lines."""


def _run(argv: list, what: str) -> None:
    done = subprocess.run([str(a) for a in argv], capture_output=True, text=True, errors="replace")
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise LlamaCppFailed(f"{what} failed (exit {done.returncode}): {' '.join(map(str, argv))}\n{tail}")


# llama.cpp's converter names a BPE tokenizer's pre-tokenizer by hashing how it splits a test text, and refuses one it
# does not know; llama.cpp refuses a BPE vocabulary without merges. A byte-level BPE without merges (the tiny test
# models' byte tokenizer: every byte is a token) splits the same under any pre-tokenizer and with any merge that can
# never apply, so for it alone the converter runs with the unknown hash read as llama.cpp's "default" and one merge of
# two multi-character symbols (no word of single bytes ever holds them); every real tokenizer (SmolLM2's, GLM-4's)
# goes through the converter as it is.
_BYTE_TOKENIZER_SHIM = """
import os, runpy, sys
script = sys.argv[1]
sys.argv = sys.argv[1:]
sys.path[:0] = [os.path.dirname(script), os.path.join(os.path.dirname(script), "gguf-py")]
import gguf
import conversion.base as base
known = base.TextModel.get_vocab_base_pre
def pre(self, tokenizer):
    try:
        return known(self, tokenizer)
    except NotImplementedError:
        return "default"
base.TextModel.get_vocab_base_pre = pre
add = gguf.SpecialVocab.add_to_gguf
def add_to_gguf(self, gw, quiet=False):
    if self.load_merges and not self.merges:
        self.merges = ["never applies"]
    add(self, gw, quiet)
gguf.SpecialVocab.add_to_gguf = add_to_gguf
runpy.run_path(script, run_name="__main__")
"""


def byte_tokenizer_without_merges(model_dir: Path) -> bool:
    file = Path(model_dir) / "tokenizer.json"
    if not file.is_file():
        return False
    model = json.loads(file.read_text(encoding="utf-8")).get("model") or {}
    return model.get("type") == "BPE" and not model.get("merges")


def convert_hf(llama: LlamaCpp, model_dir: Path, outfile: Path, *, mmproj: bool = False) -> Path:
    """llama.cpp's converter over a transformers directory: the text model (or, ``mmproj``, the vision projector)
    as an f16 GGUF."""
    script = llama.script("convert_hf_to_gguf.py")
    python = [sys.executable] + (["-c", _BYTE_TOKENIZER_SHIM] if byte_tokenizer_without_merges(model_dir) else [])
    argv = [*python, script, model_dir, "--outfile", outfile, "--outtype", "f16"]
    _run(argv + (["--mmproj"] if mmproj else []), "convert_hf_to_gguf.py" + (" --mmproj" if mmproj else ""))
    return outfile


def quantize(llama: LlamaCpp, source: Path, outfile: Path, quant: str) -> Path:
    _run([llama.binary("llama-quantize"), source, outfile, quant.upper()], f"llama-quantize {quant.upper()}")
    return outfile


def convert_lora(llama: LlamaCpp, adapter_dir: Path, base_dir: Path, outfile: Path) -> Path:
    argv = [sys.executable, llama.script("convert_lora_to_gguf.py"), adapter_dir, "--base", base_dir]
    _run(argv + ["--outfile", outfile, "--outtype", "f16"], "convert_lora_to_gguf.py")
    return outfile


def _staged(model: torch.nn.Module, tokenizer, base_path: str, out: Path, staging: str) -> Path:
    """``model`` as the transformers directory the converter reads: weights, tokenizer and (a vision model) the
    processor files the export already holds (the mmproj's image mean and size come from them)."""
    hf = Path(staging) / "hf"
    model.save_pretrained(hf)
    save_tokenizer_files(tokenizer, base_path, hf)
    for name in PROCESSOR_FILES:
        if (out / name).is_file():
            shutil.copy2(out / name, hf / name)
    return hf


def write_gguf(merged: torch.nn.Module, tokenizer, base_path: str, out: Path, spec) -> None:
    """The merged fp32 model converted (f16), quantized when asked, its mmproj beside it for a vision model."""
    llama = find_llama_cpp()
    with tempfile.TemporaryDirectory(prefix="workbench-gguf-") as staging:
        hf = _staged(merged, tokenizer, base_path, out, staging)
        f16 = convert_hf(llama, hf, gguf_file(out, "f16") if spec.quant == "f16" else Path(staging) / "f16.gguf")
        if spec.quant != "f16":
            quantize(llama, f16, gguf_file(out, spec.quant), spec.quant)
        if is_vision(merged):
            convert_hf(llama, hf, out / MMPROJ_FILE, mmproj=True)
    write_modelfile(out, tokenizer, merged.config.get_text_config().max_position_embeddings)


def write_gguf_lora(model, tokenizer, base_path: str, out: Path, spec) -> None:
    """The base (without the adapter) as an f16 GGUF and the adapter as a GGUF LoRA over it
    (``convert_lora_to_gguf.py``); ``model``: ``Reference.adapter_and_base()``."""
    llama = find_llama_cpp()
    with tempfile.TemporaryDirectory(prefix="workbench-gguf-") as staging:
        hf = _staged(model.base, tokenizer, base_path, out, staging)
        convert_hf(llama, hf, gguf_file(out, "f16"))
        if is_vision(model.base):
            convert_hf(llama, hf, out / MMPROJ_FILE, mmproj=True)
        convert_lora(llama, model.adapter_dir, hf, out / LORA_FILE)
    write_modelfile(out, tokenizer, model.base.config.get_text_config().max_position_embeddings)


def is_vision(model: torch.nn.Module) -> bool:
    return getattr(model.config, "vision_config", None) is not None


# ---- Ollama -----------------------------------------------------------------------------------------------------


def write_modelfile(out: Path, tokenizer, max_positions: int) -> Path:
    """An Ollama Modelfile beside the GGUF (https://docs.ollama.com/modelfile): FROM the GGUF (and the mmproj, a second
    FROM, for a vision model), the chat template as a Go template, the stop tokens, greedy decoding (Open-AutoGLM's
    runtime asks for temperature 0) and the context."""
    model = next(p for p in sorted(out.glob("model-*.gguf")))
    lines = [f"FROM ./{model.name}"]
    if mmproj := mmproj_file(out):
        lines.append(f"FROM ./{mmproj.name}")
    if (out / LORA_FILE).is_file():
        lines.append(f"ADAPTER ./{LORA_FILE}")
    lines.append(f'TEMPLATE """{ollama_template(tokenizer)}"""')
    lines += ["PARAMETER temperature 0", f"PARAMETER num_ctx {min(OLLAMA_CONTEXT, max_positions)}"]
    for stop in stop_tokens(tokenizer):
        lines.append(f"PARAMETER stop {json.dumps(stop)}")
    path = out / MODELFILE
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def stop_tokens(tokenizer) -> list[str]:
    eos = tokenizer.eos_token
    return [eos] if eos else []


def ollama_template(tokenizer) -> str:
    """The tokenizer's chat template as Ollama's Go template (its ``.System`` / ``.Prompt`` / ``.Response`` form),
    derived by rendering one turn of placeholders with the tokenizer's own (Jinja) template: the text around each
    placeholder is that role's markup, so a turn with a system prompt (the phone agent's always has one) is prompted in
    Ollama exactly as in training."""
    system, user, answer = "\x00SYSTEM\x00", "\x00USER\x00", "\x00ANSWER\x00"
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    full = tokenizer.apply_chat_template(
        messages + [{"role": "assistant", "content": answer}], tokenize=False, add_generation_prompt=False
    )
    start, rest = prompt.split(system, 1)
    between, generation = rest.split(user, 1)
    end = full.split(answer, 1)[1]
    return f"{start}{{{{ .System }}}}{between}{{{{ .Prompt }}}}{generation}{{{{ .Response }}}}{end}"


def parse_modelfile(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, argument) pairs of a Modelfile as Ollama reads it: one instruction a line, ``\"\"\"`` quoting
    arguments that span lines, ``#`` comments."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        line = lines[i].strip()
        i += 1
        if not line or line.startswith("#"):
            continue
        name, _, arg = line.partition(" ")
        arg = arg.strip()
        if arg.startswith('"""'):
            body = arg[3:]
            while not body.endswith('"""'):
                if i >= len(lines):
                    raise ValueError(f'{name}: unterminated """ argument')
                body += "\n" + lines[i]
                i += 1
            arg = body[:-3]
        out.append((name.upper(), arg))
    return out


# ---- parity through llama-server ------------------------------------------------------------------------------


def answer_positions(batch: dict) -> list[tuple[int, int]]:
    """(row, position) of each position whose next token is an answer token (labels shifted as the loss shifts
    them)."""
    labels = batch["labels"]
    return [(int(r), int(p)) for r, p in (labels[:, 1:] != IGNORE_INDEX).nonzero().tolist()]


# llama-server's adapters by index: the exported LoRA is the first, at scale 1
WITH_LORA = {"lora": [{"id": 0, "scale": 1.0}]}


def next_token_logprobs(
    client, prompt: list[int], k: int = TOP_LOGPROBS, extra: dict | None = None
) -> dict[int, float]:
    """llama-server's top-``k`` log-probabilities of the token after ``prompt`` (token ids), before sampling."""
    body = {"prompt": prompt, "n_predict": 1, "n_probs": k, "temperature": 0, "cache_prompt": True, **(extra or {})}
    reply = client.post("/completion", body)
    if not reply.get("completion_probabilities"):
        # llama-server holds back a token that ends inside a UTF-8 character (a byte of a CJK character) and its
        # probabilities with it: with one token to predict, none come back
        return None
    top = reply["completion_probabilities"][0]["top_logprobs"]
    return {int(t["id"]): float(t["logprob"]) for t in top}


MIN_PROB = 0.01  # log-probabilities compared for tokens at least this likely in either model (the tail's differ most)


def heldout_messages(heldout: Path, max_examples: int, system_prompt: str | None) -> list[tuple[dict, list[dict]]]:
    """The first ``max_examples`` held-out rows, each with its messages as training saw them (``system_prompt`` as the
    run's data.system_prompt): what the screenshot prompts and the action rows are both made from."""
    from ..config.files import read_jsonl
    from ..data.formats import row_to_messages

    return [(row, row_to_messages(row, system_prompt=system_prompt)) for row in read_jsonl(heldout)[:max_examples]]


def screenshot_prompts(heldout: Path, max_examples: int, system_prompt: str | None) -> list[list[dict] | None]:
    """For each of the first ``max_examples`` held-out rows, its prompt (the messages before the answer, screenshots as
    ``data:`` URLs) when it holds a screenshot, else None (its positions are compared as token ids)."""
    from ..data.multimodal import has_images
    from ..image_io import inline_images

    return [
        inline_images(messages[:-1], heldout.parent) if has_images(messages) else None
        for _, messages in heldout_messages(heldout, max_examples, system_prompt)
    ]


def action_rows(heldout: Path, max_examples: int, system_prompt: str | None) -> list[ActionRow]:
    """The first ``max_examples`` held-out rows whose answer is a phone action (``do(...)`` / ``finish(...)``, with or
    without its ``<think>``), each asked as the unexported model and a server are asked it."""
    from ..image_io import inline_images, resolve_images
    from ..phone.actions import ActionSyntaxError, parse_action, split_answer

    out = []
    for row, messages in heldout_messages(heldout, max_examples, system_prompt):
        answer = messages[-1]["content"]
        try:
            recorded = parse_action(split_answer(answer).answer) if isinstance(answer, str) else None
        except ActionSyntaxError:
            recorded = None
        if recorded is None:
            continue
        meta = row.get("meta") if isinstance(row.get("meta"), dict) else {}
        box = meta.get("target_box")
        out.append(
            ActionRow(
                prompt=resolve_images(messages[:-1], heldout.parent),
                served_prompt=inline_images(messages[:-1], heldout.parent),
                answer=answer,
                recorded=recorded,
                box=tuple(box) if box else None,
            )
        )
    return out


def action_max_tokens(tokenizer, rows: list[ActionRow]) -> int:
    """What both sides may generate for an action row: the longest recorded answer's tokens and a margin (a reply is
    compared whole; one cut short reads as no action on both sides alike)."""
    longest = max((len(tokenizer(r.answer, add_special_tokens=False)["input_ids"]) for r in rows), default=0)
    return longest + ACTION_TOKEN_MARGIN


ACTION_TOKEN_MARGIN = 32


def served_replies(client, rows: list[ActionRow], max_tokens: int, extra: dict | None = None) -> list[str]:
    """llama-server's greedy replies to the action rows, whole, as Open-AutoGLM's runtime asks (a chat request)."""
    replies = []
    for row in rows:
        body = {"messages": row.served_prompt, "max_tokens": max_tokens, "temperature": 0, **(extra or {})}
        replies.append(client.post("/v1/chat/completions", body)["choices"][0]["message"].get("content") or "")
    return replies


def first_answer_logprobs(
    client, messages: list[dict], k: int = TOP_LOGPROBS, extra: dict | None = None
) -> dict[int, float]:
    """llama-server's top-``k`` log-probabilities of the answer's first token after a chat prompt (its screenshots
    through the mmproj)."""
    body = {"messages": messages, "max_tokens": 1, "temperature": 0, "logprobs": True, "top_logprobs": k}
    body.update(extra or {})
    reply = client.post("/v1/chat/completions", body)
    top = reply["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
    return {int(t["id"]): float(t["logprob"]) for t in top}


def gguf_parity(
    reference: list[torch.Tensor],
    batches: list[dict],
    model_file: Path,
    gate: ParityGate,
    *,
    mmproj: Path | None = None,
    lora: Path | None = None,
    prompts: list[list[dict] | None] | None = None,
    reference_actions: ReferenceActions | None = None,
) -> ParityReport:
    """The GGUF, served by llama-server, against the reference logits at every answer position of ``batches``; a row
    with a screenshot (``prompts``: ``screenshot_prompts``) at its answer's first position, asked as a chat with the
    screenshot, which llama-server encodes through ``mmproj``; ``lora``: a GGUF LoRA over ``model_file``, applied to
    every request.

    Figures: greedy agreement (llama.cpp's most likely next token is the reference's argmax); the largest |log-prob
    difference| over llama.cpp's most likely token and its top tokens at least 1% likely in either model (in ParityReport's ``max_logit_diff``:
    log-probabilities are logits normalised); the held-out loss of both over the answer tokens llama.cpp lists among
    its top ones (llama-server gives no other token's probability; a trained model's answer tokens nearly all are).
    A position whose most likely token ends inside a UTF-8 character is left out (llama-server returns nothing for
    it): ``positions`` counts the ones measured. ``reference_actions``: the held-out action rows and the reference's
    greedy replies to them; llama-server answers each whole too, and the report's ``actions`` compares the two."""
    from ..serve.llama_cpp import start_llama_server

    tally, example = _ParityTally(), 0
    extra = WITH_LORA if lora else None
    with start_llama_server(_parity_server_config(model_file, mmproj, lora)) as server:
        client = server.client
        for ref, batch in zip(reference, batches):
            logprobs = torch.log_softmax(ref.float(), dim=-1)
            chats = prompts[example : example + len(batch["input_ids"])] if prompts else [None] * len(ref)
            example += len(batch["input_ids"])
            asked = set()
            for row, pos in answer_positions(batch):
                if chats[row] is not None:
                    if row in asked:  # a screenshot's row: its first answer position only
                        continue
                    asked.add(row)
                    top = first_answer_logprobs(client, chats[row], extra=extra)
                else:
                    top = next_token_logprobs(client, batch["input_ids"][row, : pos + 1].tolist(), extra=extra)
                    if top is None:  # not measurable through llama-server: left out of every figure
                        continue
                tally.add(top, logprobs[row, pos], int(batch["labels"][row, pos + 1]))
        actions = None
        if reference_actions is not None and reference_actions.rows:
            ra = reference_actions
            actions = action_parity(ra.rows, ra.replies, served_replies(client, ra.rows, ra.max_tokens, extra))
    return tally.report(sum(len(b["input_ids"]) for b in batches), gate, actions)


def _parity_server_config(model_file: Path, mmproj: Path | None, lora: Path | None):
    """The llama-server parity asks: the GGUF (its mmproj, its LoRA as ``adapter``), one request at a time."""
    from ..config import config_from_dict
    from ..serve.config import ServeConfig

    return config_from_dict(
        {
            "model": str(model_file),
            "mmproj": str(mmproj) if mmproj else None,
            "loras": {"adapter": str(lora)} if lora else {},
            "engine": "llama-cpp",
            "port": 0,
            "max_batch": 1,
            # one thread: a request is one token; two threads meet at a barrier every op, and on a busy machine one of
            # them is often descheduled (two threads at a load of 4: 0.5 to 3 s a request)
            "threads": 1,
            "log_level": "warning",
        },
        ServeConfig,
    )


class _ParityTally:
    """gguf_parity's figures over the positions measured so far."""

    def __init__(self):
        self.agreeing = self.positions = self.listed = 0
        self.worst = self.ref_loss = self.exp_loss = 0.0

    def add(self, top: dict, ref_row: torch.Tensor, label: int) -> None:
        """One answer position: llama.cpp's ``top`` {token: log-prob} against the reference's log-probabilities."""
        best = max(top, key=top.get)
        self.agreeing += int(best == int(ref_row.argmax()))
        self.positions += 1
        floor = math.log(MIN_PROB)
        diffs = [
            abs(lp - float(ref_row[t])) for t, lp in top.items() if t == best or max(lp, float(ref_row[t])) >= floor
        ]
        if not all(math.isfinite(d) for d in diffs):
            self.worst = math.nan
        elif not math.isnan(self.worst):
            self.worst = max([self.worst, *diffs])
        if label in top:
            self.listed += 1
            self.ref_loss -= float(ref_row[label])
            self.exp_loss -= top[label]

    def report(self, examples: int, gate: ParityGate, actions=None) -> ParityReport:
        return ParityReport(
            max_logit_diff=self.worst,
            agreement=self.agreeing / max(self.positions, 1),
            reference_loss=self.ref_loss / max(self.listed, 1),
            export_loss=self.exp_loss / max(self.listed, 1),
            examples=examples,
            positions=self.positions,
            gate=gate,
            actions=actions,
        )
