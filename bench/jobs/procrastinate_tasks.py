"""Procrastinate: an async task (its worker runs coroutines on its event loop; a sync task
would go through a thread). Procrastinate passes keyword arguments only."""

from typing import Any

from procrastinate.contrib.django import app

from . import noop


@app.task(name="bench.run", queue="bench")
async def run(payload: Any) -> None:
    noop(payload)
