"""A per-visitor daily budget of controller-LLM tokens on a public app (visitor_daily_tokens).

One ledger for every way in (the chat, its re-run actions, the API, MCP): each LLM call reserves
an estimate of its tokens before it is made (webui.host.charged_llm) and is settled with what it really
used, or with the estimate when the stream never said (a Stop, a client that hung up). A call
starts only while the visitor's spent and reserved tokens are under the day's limit, so parallel
requests, retries and hung-up streams go over by at most one call's estimate. A visitor is the
caller's network (webui.host.callers). Only today's counts are kept; they renew at midnight UTC.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone

from hugginggpt.llms.interface import LLMError


def _today() -> str:
    return datetime.now(timezone.utc).date().isoformat()


class BudgetSpent(LLMError):
    """The visitor's tokens for today are spent, or promised to calls still running: the call was
    not made. An LLMError, so a run ends with this message as it would with the LLM failing."""


@dataclass
class Reservation:
    visitor: str
    day: str
    tokens: int
    settled: bool = False


class DailyTokens:
    def __init__(self, limit: int, *, today: Callable[[], str] = _today) -> None:
        """`limit`: tokens per visitor per day; 0: no limit."""
        self.limit = limit
        self._today = today
        self._day = ""
        self._spent: dict[str, int] = {}
        self._reserved: dict[str, int] = {}
        self._lock = threading.Lock()

    def spent(self, visitor: str) -> int:
        with self._lock:
            self._roll()
            return self._spent.get(visitor, 0)

    def refusal(self, visitor: str) -> str | None:
        """Why `visitor` may not start an LLM call now; None while some of today's tokens are free."""
        if not self.limit:
            return None
        with self._lock:
            self._roll()
            committed = self._spent.get(visitor, 0) + self._reserved.get(visitor, 0)
            spent = self._spent.get(visitor, 0) >= self.limit
        if committed < self.limit:
            return None
        share = f"today's share of this app's LLM ({self.limit:,} tokens a day)"
        if not spent:
            return f"The rest of {share} is taken by your requests still running. Try again once they end."
        return (
            f"You have used {share}. It renews at midnight UTC; or run HuggingGPT yourself with your own LLM."
        )

    def reserve(self, visitor: str, estimate: int) -> Reservation:
        """Holds `estimate` tokens for one call; raises BudgetSpent when none are free."""
        with self._lock:
            self._roll()
            committed = self._spent.get(visitor, 0) + self._reserved.get(visitor, 0)
            if not self.limit or committed < self.limit:
                self._reserved[visitor] = self._reserved.get(visitor, 0) + estimate
                return Reservation(visitor, self._day, estimate)
        raise BudgetSpent(self.refusal(visitor) or "Today's LLM tokens are spent.")

    def settle(self, reservation: Reservation, used: int) -> None:
        """The call is over: its reservation is released and `used` tokens are charged (once)."""
        with self._lock:
            if reservation.settled:
                return
            reservation.settled = True
            self._roll()
            if reservation.day != self._day:  # reserved yesterday: nothing of today's is held
                return
            v = reservation.visitor
            self._reserved[v] = max(0, self._reserved.get(v, 0) - reservation.tokens)
            self._spent[v] = self._spent.get(v, 0) + used

    def _roll(self) -> None:
        today = self._today()
        if today != self._day:  # a new day: yesterday's counts are dropped
            self._day, self._spent, self._reserved = today, {}, {}
