"""What the GGUF export writes and needs, without llama.cpp: the Ollama Modelfile read as Ollama reads it, the one
line a missing llama.cpp gives, and the llama-server command line `workbench serve --engine llama-cpp` makes."""

from __future__ import annotations

import json

import pytest

from workbench.export.gguf import MMPROJ_FILE, MODELFILE, parse_modelfile, write_modelfile


@pytest.mark.parametrize("vision", [False, True])
def test_the_modelfile_names_the_gguf_and_mmproj_and_prompts_as_the_tokenizer_does(tmp_path, vision):
    """Parsed as Ollama reads a Modelfile: FROM the GGUF (and the mmproj, a second FROM, for a vision model); its
    TEMPLATE filled with a system prompt, a question and an answer gives the tokenizer's own rendering; the stop
    token, greedy decoding and the context."""
    from workbench.models import tiny

    tok = tiny.byte_tokenizer(vision=vision)
    (tmp_path / "model-q4_k_m.gguf").write_bytes(b"GGUF")
    if vision:
        (tmp_path / MMPROJ_FILE).write_bytes(b"GGUF")
    write_modelfile(tmp_path, tok, max_positions=8192)
    parsed = parse_modelfile((tmp_path / MODELFILE).read_text(encoding="utf-8"))
    assert [a for k, a in parsed if k == "FROM"] == ["./model-q4_k_m.gguf"] + ([f"./{MMPROJ_FILE}"] if vision else [])
    template = next(a for k, a in parsed if k == "TEMPLATE")
    filled = template.replace("{{ .System }}", "S").replace("{{ .Prompt }}", "Q").replace("{{ .Response }}", "A")
    conversation = [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}]
    assert filled == tok.apply_chat_template(conversation + [{"role": "assistant", "content": "A"}], tokenize=False)
    params = [a for k, a in parsed if k == "PARAMETER"]
    assert params == ["temperature 0", "num_ctx 8192", f"stop {json.dumps(tok.eos_token)}"]


def test_the_modelfile_parser_reads_multiline_arguments_and_refuses_an_unterminated_one():
    text = '# comment\nFROM ./m.gguf\nTEMPLATE """a\n{{ .Prompt }}\nb"""\nparameter stop "x"\n'
    assert parse_modelfile(text) == [
        ("FROM", "./m.gguf"),
        ("TEMPLATE", "a\n{{ .Prompt }}\nb"),
        ("PARAMETER", 'stop "x"'),
    ]
    with pytest.raises(ValueError, match="unterminated"):
        parse_modelfile('TEMPLATE """a\nb\n')


def test_a_missing_llama_cpp_is_one_line_naming_the_set_up(tmp_path, monkeypatch, capsys):
    """Before anything loads: exit 2 and one line saying what to run."""
    from workbench.cli.main import main

    monkeypatch.setenv("WORKBENCH_LLAMA_CPP_HOME", str(tmp_path / "none"))
    assert main(["export", str(tmp_path), "--target", "gguf", "--quant", "q8_0"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "run `bash scripts/setup.sh --llama-cpp`" in err, err


def test_the_quantization_is_checked_with_the_target(tmp_path, capsys):
    from workbench.cli.main import main

    assert main(["export", str(tmp_path), "--target", "merged", "--quant", "q4_k_m"]) == 2
    assert "quant q4_k_m applies to --target gguf only" in capsys.readouterr().err
    assert main(["export", str(tmp_path), "--target", "gguf", "--quant", "q3"]) == 2
    assert "quant 'q3': choose one of f16, q8_0, q4_k_m" in capsys.readouterr().err


def test_serve_llama_cpp_prints_llama_servers_command(tmp_path, capsys):
    """The GGUF under our id, its mmproj and LoRAs, its own chat template (--jinja), reasoning inline; the API key kept
    off the command line."""
    from workbench.cli.main import main

    for name in ("m.gguf", "mmproj.gguf", "a.gguf"):
        (tmp_path / name).write_bytes(b"GGUF")
    argv = ["serve", "--engine", "llama-cpp", "--model", str(tmp_path / "m.gguf"), "--model-id", "phonemate"]
    argv += ["--mmproj", str(tmp_path / "mmproj.gguf"), "--lora", f"app={tmp_path / 'a.gguf'}", "--port", "8123"]
    assert main([*argv, "--api-key", "secret", "--print-command"]) == 0
    line = capsys.readouterr().out
    for part in (
        f"--model {tmp_path / 'm.gguf'} --alias phonemate",
        "--port 8123",
        "--jinja --reasoning-format none",
        f"--mmproj {tmp_path / 'mmproj.gguf'}",
        f"--lora {tmp_path / 'a.gguf'}",
    ):
        assert part in line, line
    assert "secret" not in line


def test_serve_llama_cpp_refuses_what_llama_server_cannot_take(tmp_path, capsys):
    """Every problem at once, each naming its option: a model that is no GGUF, a peft run, reasoning split, and the
    GGUF options on another engine."""
    from workbench.cli.main import main

    assert (
        main(["serve", "--engine", "llama-cpp", "--model", str(tmp_path / "m.safetensors"), "--reasoning", "split"])
        == 2
    )
    err = capsys.readouterr().err
    assert "model: " in err and "is not a .gguf file" in err and "reasoning: llama-server" in err
    assert main(["serve", "--mmproj", str(tmp_path / "p.gguf")]) == 2
    assert "mmproj: applies to --engine llama-cpp only" in capsys.readouterr().err


def test_the_runs_panels_export_job_asks_for_the_quantization(tmp_path):
    """The runs panel's Export section offers each GGUF quantization; its child process is given it."""
    from workbench.export.job import ExportJob
    from workbench.export.targets import TargetSpec, target_choices

    specs = {s.name: s for s in target_choices()}
    assert {"gguf-f16", "gguf-q8_0", "gguf-q4_k_m", "gguf-lora"} <= set(specs)
    cmd = ExportJob(tmp_path, specs["gguf-q4_k_m"]).command()
    assert cmd[cmd.index("--target") + 1] == "gguf" and cmd[cmd.index("--quant") + 1] == "q4_k_m"
    assert "--quant" not in ExportJob(tmp_path, TargetSpec("merged")).command()
