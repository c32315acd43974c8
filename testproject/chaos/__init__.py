"""The chaos suite's app: consumers for the chaos-* queues and the tables their handlers write.

tests/chaos drives these consumers through real worker processes and checks the outcome with
tests/chaos/invariants.py; docs/reliability.md shows the figures of the last `make chaos`.
"""
