"""Engine replicas on Ray: ReplicaGroup, an engine protocol over N AsyncEngine actors."""
