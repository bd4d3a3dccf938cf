"""The run core both runners drive: the scheduler, a plan in flight (bindings, results, the
ledger), a map's or reduce's items, references to stored results, the conversation's memory,
the agent step's loop and the agent's tool hooks. No I/O and no clock: workflow code."""
