"""GET /v1/models/{id}: the openai client's models.retrieve, and OpenAI's 404 for other ids."""

from __future__ import annotations

import openai
import pytest

from llmkit.protocol.openai import ModelCard


def test_retrieve_answers_each_served_name(client):
    for name in ("tiny", "also-tiny"):
        card = client.models.retrieve(name)
        assert card.id == name and card.object == "model" and card.owned_by == "llmkit"
        assert card.model_extra["max_model_len"] == 256


def test_an_unknown_id_is_openais_404(client, server):
    with pytest.raises(openai.NotFoundError) as caught:
        client.models.retrieve("gpt-4o")
    assert caught.value.body["code"] == "model_not_found"
    assert caught.value.body["param"] == "model" and "gpt-4o" in caught.value.body["message"]
    with server.http() as http:
        slashed = http.get("/v1/models/org/tiny")
        document = http.get("/openapi.json").json()
    assert slashed.status_code == 404
    route = document["paths"]["/v1/models/{model}"]["get"]
    assert {"200", "404"} <= route["responses"].keys()
    assert route["parameters"][0]["name"] == "model"
    assert ModelCard.__name__ in document["components"]["schemas"]
