"""Scale-out: tensor-parallel workers over torch.distributed, and engine replicas on Ray."""
