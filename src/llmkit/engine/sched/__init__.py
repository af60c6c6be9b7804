"""Scheduling as pure policy, with no torch (a contract on the whole package): requests,
the scheduler, the KV block allocator and prefix cache, admission, stop checks, step rows."""
