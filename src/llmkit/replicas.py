"""Engine replicas on Ray behind one engine protocol: ``ReplicaGroup`` (``llmkit[ray]``).

The stable import point for apps: ``create_app(ReplicaGroup(config, num_replicas=2))``.
"""

from llmkit.remote.ray import ReplicaGroup

__all__ = ["ReplicaGroup"]
