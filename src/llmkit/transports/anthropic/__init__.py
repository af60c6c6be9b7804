"""Anthropic's Messages API (/v1/messages), on the same app and models as OpenAI's."""
