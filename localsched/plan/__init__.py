"""The plan: the task spec, the static order, fused subgraphs, and dask's bag and
delayed optimizers done in linear time (``dask_optimizers``)."""
