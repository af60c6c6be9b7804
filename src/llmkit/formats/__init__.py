"""Text formats that several plugin interfaces read: OpenAI's Harmony (gpt-oss), for its tool
and reasoning parsers."""
