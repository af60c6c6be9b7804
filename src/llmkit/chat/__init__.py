"""Chat templates: the built-in ones (entry point group ``llmkit.chat_templates``) and
resolving ``--chat-template`` (a plugin name, a file, or the template itself)."""
