"""The plan: the task spec, the static order, fused subgraphs."""
