"""The benchmark harness of django-alkqueue: `make bench` / `make bench-quick` (bench/README.md)."""
