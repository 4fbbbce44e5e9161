"""Provider capabilities: what a provider accepts, which changes how a view renders.

Caps are a per-session setting recorded as an event, so replay renders with the caps that were in
force. They never change a stored body, only the view.
"""

from __future__ import annotations

from typing import Final

from transcript.model.errors import InvalidArgument
from transcript.model.events import ProviderCaps as ProviderCaps

NEUTRAL: Final = ProviderCaps()
KNOWN_PROVIDERS: Final = {
    "neutral": NEUTRAL,
    "anthropic": ProviderCaps(provider="anthropic"),
    "openai": ProviderCaps(provider="openai", requires_signed_reasoning=False),
    "text-only": ProviderCaps(provider="text-only", supports_media=False, requires_signed_reasoning=False),
}


def caps_for(provider: str | ProviderCaps | None) -> ProviderCaps:
    """Caps by provider name (or caps given as they are); `None` is the neutral provider."""
    if provider is None:
        return NEUTRAL
    if isinstance(provider, ProviderCaps):
        return provider
    known = KNOWN_PROVIDERS.get(provider) if isinstance(provider, str) else None
    if known is None:
        raise InvalidArgument(f"unknown provider {provider!r} (known: {', '.join(KNOWN_PROVIDERS)})")
    return known
