"""spinfc's studies: each a short script run as `python -m benchmarks.NAME` from the repository root, built on
`benchmarks.harness` (models, jobs, serving, clients, timing, report). See benchmarks/README.md."""
