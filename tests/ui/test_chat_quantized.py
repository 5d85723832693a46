"""Chatting with a run trained over a quantized base (quantization.base nf4), by the same commands as a LoRA run: the
chat panel's answer is the run's model's greedy answer, built by hand (tests/conftest.py: qlora_reference), not its
adapter's on the 16-bit base (what a chat that silently left the base unquantized would answer: this test fails then,
checked by breaking it). %workbench_chat serves such a run on a server of its own base."""

from __future__ import annotations

from tests.conftest import qlora_reference

PROMPT = "What is 2+2?"  # the fixture run answers it with text (not a stop at once), on either base
TOKENS = 12


def _greedy(model, tok) -> str:
    from workbench.forward.generate import greedy_replies

    return greedy_replies(model, tok, [[{"role": "user", "content": PROMPT}]], TOKENS)[0]


def test_the_chat_panel_answers_with_a_qlora_run_on_its_quantized_base(qlora_run):
    from workbench.serve import start_server
    from workbench.ui.chat_panel import ChatComparePanel

    with start_server("tiny-glm4", runs=[str(qlora_run)], threads=1) as srv:
        panel = ChatComparePanel(server=srv, max_tokens=TOKENS)
        replies = panel.ask(PROMPT, models=["tiny-glm4", "qlora"])
    assert not replies["qlora"].error
    quantized, tok = qlora_reference(qlora_run)
    unquantized, _ = qlora_reference(qlora_run, quantized=False)
    expected, on_16_bit = _greedy(quantized, tok), _greedy(unquantized, tok)
    assert expected != on_16_bit  # the comparison below tells them apart (measured: eeee against eeeee)
    assert replies["qlora"].content == expected, (replies["qlora"].content, expected, on_16_bit)


def test_workbench_chat_serves_a_qlora_run_apart_from_the_16_bit_base(qlora_run, monkeypatch):
    from workbench.ui import magics

    started = []

    class Handle:
        def __init__(self, base, runs=()):
            self.base, self.runs, self.added = base, list(runs), []
            started.append(self)

        def models(self):
            return [self.base]

        def add_adapter(self, name, path):
            self.added.append(name)

    monkeypatch.setattr("workbench.serve.start_server", Handle)
    chat = magics.WorkbenchMagics.__new__(magics.WorkbenchMagics)
    chat.servers = {"tiny-glm4": Handle("tiny-glm4")}  # a server of the 16-bit base, started for another chat
    server, model = chat._local_server(str(qlora_run), qlora_run.parent)
    assert model == "qlora" and server is started[-1] and server.runs == [str(qlora_run)]
    assert chat.servers["tiny-glm4"].added == []  # not put on the 16-bit base
