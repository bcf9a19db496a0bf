"""Studies: the paper's regime at small scale, run with the project's own
trainer, and the analytic scaling model."""
