"""A wrong value for any of serve's deployment flags stops the start, naming the flag."""

from __future__ import annotations

import subprocess
import sys

import pytest

from llmkit.cli import main


@pytest.fixture
def files(tmp_path):
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate")
    not_json = tmp_path / "log.json"
    not_json.write_text("{version: 1")
    bad_config = tmp_path / "bad.json"
    bad_config.write_text('{"version": 2}')
    return {"garbage": str(garbage), "not_json": str(not_json), "bad_config": str(bad_config)}


CASES = {
    "--ssl-keyfile": ["--ssl-keyfile", "/no/such.key", "--ssl-certfile", "{garbage}"],
    "--ssl-certfile": ["--ssl-keyfile", "{garbage}", "--ssl-certfile", "{garbage}"],
    "--ssl-ca-certs": ["--ssl-ca-certs", "/no/such/ca.pem"],
    "--ssl-cert-reqs": ["--ssl-cert-reqs", "3"],
    "--middleware": ["--middleware", "no_such_module_here:Middleware"],
    "--log-config-file": ["--log-config-file", "{not_json}"],
    "--uvicorn-log-level": ["--uvicorn-log-level", "loud"],
    "--chat-template-content-format": ["--chat-template-content-format", "html"],
    "--response-role": ["--response-role", " "],
    "--enable-server-load-tracking": ["--enable-server-load-tracking=yes"],
    "--disable-uvicorn-access-log": ["--disable-uvicorn-access-log=1"],
    "--return-tokens-as-token-ids": ["--return-tokens-as-token-ids=1"],
    "--enable-force-include-usage": ["--enable-force-include-usage=1"],
    "--enable-prompt-tokens-details": ["--enable-prompt-tokens-details=1"],
    "--tool-call-parser": ["--tool-call-parser", "no_such_parser"],
    "--reasoning-parser": ["--reasoning-parser", "no_such_parser"],
    "--enable-auto-tool-choice": ["--enable-auto-tool-choice"],
    "--chat-template": ["--chat-template", "no_such_template"],
    "--rate-limit-concurrency": ["--rate-limit-concurrency", "0"],
    "--rate-limit-rps": ["--rate-limit-rps", "-1"],
    "--rate-limit-burst": ["--rate-limit-burst", "5"],
    "--sse-keepalive-s": ["--sse-keepalive-s", "-1"],
    "--data-parallel-size": ["--data-parallel-size", "0"],
    "--ws-max-requests": ["--ws-max-requests", "0"],
    "--ws-ping-timeout": ["--ws-ping-timeout", "0"],
    "--max-request-body-bytes": ["--max-request-body-bytes", "-1"],
    "--allowed-local-media-path": ["--allowed-local-media-path", "/no/such/dir"],
    "--lora-modules": ["--lora-modules", "a=/some/adapter"],  # without --enable-lora
    "--enable-lora-runtime-updates": ["--enable-lora-runtime-updates"],
}
MORE = [
    ("--ssl-keyfile", ["--ssl-certfile", "{garbage}"]),
    ("--ssl-cert-reqs", ["--ssl-cert-reqs", "2"]),
    ("--middleware", ["--middleware", "json:no_such_attr"]),
    ("--middleware", ["--middleware", "json:__doc__"]),
    ("--log-config-file", ["--log-config-file", "/no/such/log.json"]),
    ("--log-config-file", ["--log-config-file", "{bad_config}"]),
    ("--rate-limit-burst", ["--rate-limit-rps", "2", "--rate-limit-burst", "0"]),
    ("--lora-modules", ["--enable-lora", "--lora-modules", "no-path"]),
    ("--lora-modules", ["--enable-lora", "--lora-modules", '{{"name": "a"}}']),
    ("--lora-modules", ["--enable-lora", "--lora-modules", "a=/x", "a=/y"]),
]


@pytest.mark.parametrize(
    ("flag", "argv"),
    [*CASES.items(), *MORE],
    ids=[*CASES, *(f"{f}-{i}" for i, (f, _) in enumerate(MORE))],
)
def test_a_wrong_value_names_its_flag(flag, argv, files, capsys):
    args = [arg.format(**files) for arg in argv]
    with pytest.raises(SystemExit) as failure:
        main(["serve", "demo", *args])
    message = f"{failure.value.code} {capsys.readouterr().err}"
    assert failure.value.code != 0 and flag in message


def test_the_start_fails_before_the_model_loads():
    result = subprocess.run(
        [sys.executable, "-m", "llmkit.cli", "serve", "no/such/model", "--middleware", "nope:X"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "--middleware: cannot import 'nope:X'" in result.stderr
