"""The model manager: many named models behind one server, loaded on first request, kept alive,
unloaded least recently used first under a memory budget. Apps import its names from
:mod:`llmkit.models`; the layers above import them from the modules here."""
