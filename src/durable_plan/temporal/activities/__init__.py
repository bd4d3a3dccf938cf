"""Activity code: where side effects happen (tools, stores, history reads). It may use
``wire`` and the workflow side's plain definitions; workflow code never imports it."""
