"""A per-visitor daily budget of controller-LLM tokens on a public app (visitor_daily_tokens).

A visitor (the address a request came from) who has spent the day's tokens is answered with a
message until the next day (UTC). A request's tokens are counted when it ends, so the last request
may go over; what is refused is the next one. Only today's counts are kept.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timezone

from hugginggpt.events import Done, Event


def _today() -> str:
    return datetime.now(timezone.utc).date().isoformat()


class DailyTokens:
    def __init__(self, limit: int, *, today: Callable[[], str] = _today) -> None:
        """`limit`: tokens per visitor per day; 0: no limit."""
        self.limit = limit
        self._today = today
        self._day = ""
        self._spent: dict[str, int] = {}
        self._lock = threading.Lock()

    def spent(self, visitor: str) -> int:
        with self._lock:
            self._roll()
            return self._spent.get(visitor, 0)

    def refusal(self, visitor: str) -> str | None:
        """The message for a visitor whose tokens for today are spent; None while some are left."""
        if not self.limit or self.spent(visitor) < self.limit:
            return None
        return (
            f"You have used today's share of this app's LLM ({self.limit:,} tokens a day). "
            "It renews at midnight UTC; or run HuggingGPT yourself with your own LLM."
        )

    def counted(self, visitor: str, events: Iterator[Event]) -> Iterator[Event]:
        """The run's events, unchanged; its tokens are charged to `visitor` at its Done."""
        try:
            for event in events:
                if isinstance(event, Done) and self.limit:
                    spent = event.usage.total_tokens
                    with self._lock:
                        self._roll()
                        self._spent[visitor] = self._spent.get(visitor, 0) + spent
                yield event
        finally:  # a listener that stops early stops the run
            getattr(events, "close", lambda: None)()

    def _roll(self) -> None:
        today = self._today()
        if today != self._day:  # a new day: yesterday's counts are dropped
            self._day, self._spent = today, {}
