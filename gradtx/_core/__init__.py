"""The core below every algorithm: the protocol, `chain`, the rule constructor and what it stands on.

Nothing here imports from the rest of gradtx. One module per concern:

- `protocol`: the types (`GradientTransformation`, its kinds `ElementWise` / `LeafWise`), errors, marks.
- `checks`: argument checks at construction time (what a factory refuses, and how it says so).
- `scalars`: the dtype policy of a step's scalars (how hyperparameters meet a leaf).
- `hyper`: hyperparameters at a step (schedules resolved) and the step count.
- `walk`: walking update trees (`None` and row-sparse leaves, structure errors, key paths).
- `formulas`: the small formulas shared by many rules (moments, thresholds, norms).
- `sliced`: reductions that stay exact on ZeRO's slices; `vma`: `shard_map`'s varying-axes types.
- `placement`: creating slots placed like their parameters in every sharding mode.
- `naming`: a transform's name (what a checkpoint records).
- `masks`: selecting parameters by mask, prefix or key-path pattern.
- `shapes`: the trace-time checks of updates and state against the params.
- `row_sparse`, `sparse_rows`: row-sparse gradients and the formula on touched rows.
- `packed_layout`, `packed`: packed parameters and `leaf_wise` (per-leaf views of packed trees).
- `factory`: `api`, what every public factory's result goes through, and member handling.
- `chain`: composition; `updates`: `apply_updates` and the target-network updates.
- `rule`, `rule_parts`: `update_rule`, the one constructor of the building blocks.
"""
