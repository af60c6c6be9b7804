"""`llmkit serve` over HTTPS: a self-signed CA made here, client certificates required."""

from __future__ import annotations

import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path

import httpx
import openai
import pytest

_EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def _openssl(*args: str | Path, cwd: Path) -> None:
    subprocess.run(["openssl", *map(str, args)], cwd=cwd, check=True, capture_output=True)


def _signed(name: str, usage: str, cwd: Path) -> None:
    """``name.key`` and ``name.pem``, for 127.0.0.1, signed by the CA in ``cwd``."""
    _openssl(
        "req",
        *_EC,
        "-keyout",
        f"{name}.key",
        "-out",
        f"{name}.csr",
        "-subj",
        f"/CN={name}",
        cwd=cwd,
    )
    (cwd / f"{name}.ext").write_text(
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
        f"keyUsage=digitalSignature\nextendedKeyUsage={usage}\n"
        "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n"
    )
    _openssl(
        "x509",
        "-req",
        "-in",
        f"{name}.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "1",
        "-out",
        f"{name}.pem",
        "-extfile",
        f"{name}.ext",
        cwd=cwd,
    )


@dataclass
class Certs:
    ca: Path
    server_key: Path
    server_cert: Path
    client_key: Path
    client_cert: Path

    def context(self, with_client_cert: bool) -> ssl.SSLContext:
        """A client's TLS context that trusts the test CA."""
        context = ssl.create_default_context(cafile=str(self.ca))
        if with_client_cert:
            context.load_cert_chain(self.client_cert, self.client_key)
        return context


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Certs:
    if subprocess.run(["which", "openssl"], capture_output=True).returncode:
        pytest.skip("needs the openssl command")
    d = tmp_path_factory.mktemp("tls")
    _openssl(
        "req",
        "-x509",
        *_EC,
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "1",
        "-subj",
        "/CN=llmkit test CA",
        cwd=d,
    )
    _signed("server", "serverAuth", d)
    _signed("client", "clientAuth", d)
    return Certs(
        d / "ca.pem", d / "server.key", d / "server.pem", d / "client.key", d / "client.pem"
    )


@pytest.fixture(scope="module")
def https_url(module_server, tiny_model, certs) -> str:
    server = module_server(
        tiny_model,
        "--ssl-keyfile",
        str(certs.server_key),
        "--ssl-certfile",
        str(certs.server_cert),
        "--ssl-ca-certs",
        str(certs.ca),
        "--ssl-cert-reqs",
        "2",
        "--served-model-name",
        "tiny",
        "--log-level",
        "warning",
        scheme="https",
        verify=certs.context(with_client_cert=True),
    )
    return server.url


def test_the_openai_client_reaches_the_server_over_https(https_url, certs):
    http_client = httpx.Client(verify=certs.context(with_client_cert=True))
    with openai.OpenAI(
        base_url=https_url + "/v1", api_key="none", http_client=http_client, max_retries=0
    ) as client:
        completion = client.completions.create(model="tiny", prompt="Hi", max_tokens=3)
        models = client.models.list()
    assert https_url.startswith("https://")
    assert completion.usage.completion_tokens == 3 and len(models.data) == 1


def test_a_client_without_a_certificate_is_refused(https_url, certs):
    http_client = httpx.Client(verify=certs.context(with_client_cert=False))
    with (
        openai.OpenAI(
            base_url=https_url + "/v1", api_key="none", http_client=http_client, max_retries=0
        ) as client,
        pytest.raises(openai.APIConnectionError),
    ):
        client.models.list()


def test_a_client_that_does_not_trust_the_certificate_is_refused(https_url):
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(https_url + "/health")
