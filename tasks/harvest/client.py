"""Asking Gallica politely: one request at a time, spaced, identified, and patient when told to.

Every request starts at least `min_interval_s` after the previous one started (one a second by
default). A 429 or 503 is waited out for as long as its `Retry-After` says (seconds or an HTTP
date; capped by `max_wait_s`), a bounded number of times. A server error, a dropped connection
or an answer that does not parse is tried again a bounded number of times with a growing pause;
then the request fails with its reason (HarvestFailure), for the caller to quarantine the issue
it was for. Answers are kept in the home's cache (tasks/harvest/cache.py) before they are used,
so nothing fetched is fetched again, even after a kill.
"""
from __future__ import annotations

import email.utils
import logging
import time
from collections.abc import Callable
from datetime import datetime, timezone
from urllib.parse import urlencode

import httpx

from schemas.harvest import GallicaSettings
from tasks.harvest.cache import FetchCache

log = logging.getLogger(__name__)

ABSENT = "#absent"  # suffix of the cache key that records a 404 of an optional service


def user_agent(settings: GallicaSettings) -> str:
    """The User-Agent of every request: the project, its version and the configured contact."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        ours = version("mabillon")
    except PackageNotFoundError:  # a checkout run without installing
        ours = "dev"
    return settings.user_agent(ours)


class HarvestFailure(Exception):
    """A request that could not be answered usefully; `reason` says why, for the quarantine."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a Retry-After header: delta-seconds or an HTTP date; None if absent
    or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - (now or datetime.now(timezone.utc))).total_seconds())


class PoliteClient:
    """A spaced, retrying, caching GET for Gallica's services. Counts what it fetched and what
    it took from the cache (`requests`, `cached`)."""

    def __init__(self, settings: GallicaSettings, cache: FetchCache, user_agent: str,
                 sleep: Callable[[float], None] = time.sleep):
        self.settings, self.cache, self.sleep = settings, cache, sleep
        self.http = httpx.Client(base_url=settings.base_url.rstrip("/"), timeout=settings.timeout_s,
                                 headers={"User-Agent": user_agent}, follow_redirects=True)
        self._last_start: float | None = None
        self.requests = 0
        self.cached = 0

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> "PoliteClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def fetch(self, path: str, params: dict | None = None, *, check: Callable[[bytes], object] | None = None,
              optional: bool = False, use_cache: bool = True) -> bytes | None:
        """The answer to GET `path?params`: from the cache when it was fetched before, else from
        Gallica (kept in the cache once `check` accepts it). An `optional` service that answers
        404 gives None (remembered too). Raises HarvestFailure with the reason."""
        key = path + ("?" + urlencode(sorted((params or {}).items())) if params else "")
        if use_cache:
            kept = self.cache.get(key)
            if kept is not None:
                self.cached += 1
                return kept
            if optional and self.cache.get(key + ABSENT) is not None:
                self.cached += 1
                return None
        answer = self._get_until_usable(path, params, key, check, optional)
        if use_cache:
            self.cache.put(key + ABSENT if answer is None else key, answer or b"")
        return answer

    def _get_until_usable(self, path, params, key, check, optional) -> bytes | None:
        failures = throttled = 0
        while True:
            self._space_out()
            try:
                response = self.http.get(path, params=params)
            except httpx.TransportError as exc:
                failures += 1
                self._again_or_fail(failures, f"{key}: {type(exc).__name__} ({exc})")
                continue
            finally:
                self.requests += 1
            status = response.status_code
            if status in (429, 503):
                throttled += 1
                if throttled > self.settings.throttled_retries:
                    raise HarvestFailure(f"{key}: still answered {status} after {throttled} waits")
                wait = retry_after_seconds(response.headers.get("Retry-After"))
                wait = self._backoff(throttled) if wait is None else wait
                log.info("Gallica answered %s to %s: waiting %.1f s", status, key, wait)
                self.sleep(min(wait, self.settings.max_wait_s))
                continue
            if status == 404 and optional:
                return None
            if status >= 500:
                failures += 1
                self._again_or_fail(failures, f"{key}: server error {status}")
                continue
            if status != 200:
                raise HarvestFailure(f"{key}: answered {status}")
            data = response.content
            try:
                if check is not None:
                    check(data)
            except ValueError as exc:
                failures += 1
                self._again_or_fail(failures, f"{key}: malformed answer ({exc})")
                continue
            return data

    def _again_or_fail(self, failures: int, reason: str) -> None:
        if failures > self.settings.retries:
            raise HarvestFailure(f"{reason}, after {failures} tries")
        log.info("%s; trying again (%d of %d)", reason, failures, self.settings.retries)
        self.sleep(self._backoff(failures))

    def _backoff(self, attempt: int) -> float:
        return self.settings.backoff_s * 2 ** (attempt - 1)

    def _space_out(self) -> None:
        """Wait until `min_interval_s` has passed since the previous request started."""
        now = time.monotonic()
        if self._last_start is not None:
            due = self._last_start + self.settings.min_interval_s
            while now < due:
                self.sleep(due - now)
                now = time.monotonic()
        self._last_start = now
