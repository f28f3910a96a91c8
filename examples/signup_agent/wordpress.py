"""The site of the first article: a form plug-in, webhooks, a REST API and a paid extension.

Everything is in memory and deterministic. What matters is where each part
of the story lives:

- the REST route ``POST /wp/v2/users`` declares its own contract
  (:data:`USERS_ROUTE`): ``username``, ``email`` and ``password`` are
  required. The same dictionary is the tool's input schema and what the
  route checks a delivery against, so the contract the model reads is the
  contract the site enforces;
- the free plug-in ("Webhook Actions") registers the webhook tools;
- the paid extension ("Webhook Actions Pro") registers the Code Glue snippet
  tools as a component whose boot check requires core 2.3 or newer. On a
  site running 2.2 the check fails, exactly as the article's ``plugins_loaded``
  gate did, and the registry knows it.

``registry`` at the bottom is the site as deployed (core 2.3, the extension
starts): what ``veridic check examples.signup_agent.wordpress:registry`` and the
committed ``manifest.json`` describe.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from typing import Final

from veridic import BootError, Registry

_log = logging.getLogger("signup_agent.wordpress")

__all__ = [
    "FORM",
    "SUBMISSION",
    "USERS_ROUTE",
    "Site",
    "build_registry",
    "deployed",
    "registry",
]

FORM: Final = "contact-form-1"
"""The Contact Form 7 form whose submissions should become users."""

SUBMISSION: Final[dict[str, str]] = {
    "your-name": "Ann Lee",
    "your-email": "ann@example.com",
    "your-message": "Please open an account for me.",
}
"""The captured CF7 payload: a name and an email, no password."""

USERS_ROUTE: Final[dict[str, object]] = {
    "type": "object",
    "properties": {
        "username": {"type": "string", "description": "Login name for the user."},
        "email": {"type": "string", "description": "The email address for the user."},
        "password": {
            "type": "string",
            "description": "Password for the user (never included in responses).",
        },
        "name": {"type": "string", "description": "Display name for the user."},
        "roles": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Roles assigned to the user.",
        },
    },
    "required": ["username", "email", "password"],
    "additionalProperties": False,
}
"""What ``OPTIONS /wp/v2/users`` answers for ``POST``, as a JSON schema."""

USERS_ROUTE_DESCRIPTION: Final = (
    "POST /wp/v2/users on this site: create a user account. The route declares its own "
    "arguments and which of them are required: read them with get_tool_schema before "
    "planning a build that calls it."
)
USERS_ROUTE_PIN: Final = "sha256:03e5eb8e34e65745a5e90f945a2f2c3dc89a2b0a0f6a94e2dcf5437920d8b895"
"""The description above, reviewed and pinned by hash (it is registered as an external spec)."""

CORE_NEEDED: Final = (2, 3)


@dataclass
class Webhook:
    """A webhook: the form it listens to, the route it calls, how it fills the route's arguments."""

    name: str
    form: str
    route: str
    enabled: bool
    credential: str | None = None
    fields: dict[str, str] = field(default_factory=dict)
    snippets: list[str] = field(default_factory=list)


@dataclass
class Snippet:
    """A Code Glue snippet: PHP that computes one field of a payload before dispatch."""

    name: str
    sets_field: str
    code: str


class Site:
    """One WordPress site: its versions, its webhooks, its users. In memory, deterministic."""

    def __init__(self, core_version: str, *, pro_installed: bool = True) -> None:
        self.core_version = core_version
        self.pro_installed = pro_installed
        self.webhooks: dict[str, Webhook] = {}
        self.snippets: dict[str, Snippet] = {}
        self.users: list[dict[str, object]] = []
        self.credentials: dict[str, str] = {"integration-bot": "application password"}

    def boot_pro(self) -> None:
        """Webhook Actions Pro's version gate, run once when the registry boots.

        The reason is a ``BootError`` written in code: the capability section
        tells the model a failed boot's reason, and that must be code text.
        The site's own version goes to the log, not to the prompt.

        Raises:
            BootError: the extension is not installed, or the core is older than 2.3.
        """
        if not self.pro_installed:
            raise BootError("Webhook Actions Pro is not installed")
        if _version(self.core_version) < CORE_NEEDED:
            _log.info("Webhook Actions Pro needs core 2.3; this site runs %s", self.core_version)
            raise BootError("requires core >= 2.3")

    def post_users(self, payload: dict[str, object]) -> str:
        """``POST /wp/v2/users``: create a user, or answer 400 as WordPress does."""
        required = USERS_ROUTE["required"]
        missing = (
            [name for name in required if name not in payload] if isinstance(required, list) else []
        )
        if missing:
            return f"400 rest_missing_callback_param: Missing parameter(s): {', '.join(missing)}"
        user = {k: v for k, v in payload.items() if k != "password"}
        self.users.append(user)
        return (
            f"201 Created: user #{len(self.users)} {payload['username']!s} <{payload['email']!s}>"
        )

    def deliver(self, webhook: str, submission: dict[str, str]) -> str:
        """Send one form submission through a webhook, as a live delivery would."""
        hook = self.webhooks.get(webhook)
        if hook is None:
            return f"404 no webhook named {webhook!r}"
        if hook.credential is None:
            return "401 rest_not_logged_in: the webhook has no credential"
        payload: dict[str, object] = {
            argument: submission[source]
            for argument, source in hook.fields.items()
            if source in submission
        }
        for name in hook.snippets:
            snippet = self.snippets[name]
            payload[snippet.sets_field] = _generated(snippet, submission)
        if hook.route != "create_user":
            return f"404 rest_no_route: {hook.route}"
        answer = self.post_users(payload)
        if answer.startswith("201") and hook.snippets:
            answer += f", {' and '.join(hook.snippets)} set {', '.join(self._set_by(hook))}"
        return answer

    def _set_by(self, hook: Webhook) -> list[str]:
        return [self.snippets[name].sets_field for name in hook.snippets]


def build_registry(site: Site) -> Registry:
    """The site's tool catalog: the REST route, the free plug-in's tools, the extension's.

    One registry per site; the extension's boot check runs when it first boots.
    """
    registry = Registry("signup-site")
    registry.external(
        name="create_user",
        description=USERS_ROUTE_DESCRIPTION,
        input_schema=USERS_ROUTE,
        handler=site.post_users,
        kind="write",
        pin=USERS_ROUTE_PIN,
        source="rest:POST /wp/v2/users",
    )

    @registry.tool(kind="write")
    def create_webhook(name: str, form: str, route: str, enabled: bool = True) -> str:
        """Create a webhook that sends each submission of a Contact Form 7 form to a REST route.

        Args:
            name: A name for the webhook; the other webhook tools refer to it by this name.
            form: The Contact Form 7 form whose submissions it sends, e.g. "contact-form-1".
            route: The tool name of the REST route that receives them, e.g. "create_user".
            enabled: Whether live submissions are sent. Create it disabled while a
                required argument of the route has no source.
        """
        site.webhooks[name] = Webhook(name, form, route, enabled)
        state = "enabled" if enabled else "disabled: live submissions are not sent"
        return f"webhook {name!r} created for {form} -> {route} ({state})"

    @registry.tool(kind="write")
    def assign_credential(webhook: str, credential: str) -> str:
        """Let a webhook call the REST API as a stored application-password credential.

        Args:
            webhook: The webhook's name.
            credential: The name of a stored credential, e.g. "integration-bot".
        """
        if credential not in site.credentials:
            return f"no stored credential named {credential!r}"
        site.webhooks[webhook].credential = credential
        return f"webhook {webhook!r} calls the API as {credential!r}"

    @registry.tool(kind="write")
    def set_mapping(webhook: str, fields: dict[str, str]) -> str:
        """Fill the route's arguments from the form: each route argument takes one form field.

        Args:
            webhook: The webhook's name.
            fields: Route argument -> form field, e.g. {"email": "your-email"}.
        """
        site.webhooks[webhook].fields = dict(fields)
        listed = ", ".join(f"{k} <- {v}" for k, v in fields.items())
        return f"webhook {webhook!r} maps {listed}"

    @registry.tool(kind="write")
    def test_dispatch(webhook: str) -> str:
        """Send the latest captured form submission through a webhook now, as a live delivery.

        The answer is the REST API's own: a created user, or the error a live
        delivery would get.

        Args:
            webhook: The webhook's name.
        """
        return site.deliver(webhook, SUBMISSION)

    pro = registry.component(
        "Pro extension",
        boot=site.boot_pro,
        provides="Code snippets (Code Glue)",
        hint=(
            "Update Webhook Actions to 2.3 or newer, then make sure Webhook Actions Pro "
            "is installed, up to date and licensed."
        ),
    )

    @pro.tool(kind="write")
    def create_snippet(name: str, sets_field: str, code: str) -> str:
        """Create a Code Glue snippet: PHP code that computes one payload field before dispatch.

        Args:
            name: A name for the snippet; assign_snippet refers to it by this name.
            sets_field: The route argument the snippet fills, e.g. "password".
            code: The PHP body; its return value becomes the field's value.
        """
        site.snippets[name] = Snippet(name, sets_field, code)
        return f"snippet {name!r} sets {sets_field}"

    @pro.tool(kind="write")
    def assign_snippet(webhook: str, snippet: str) -> str:
        """Run a Code Glue snippet on every delivery of a webhook, just before it is sent.

        Args:
            webhook: The webhook's name.
            snippet: The snippet's name.
        """
        site.webhooks[webhook].snippets.append(snippet)
        return f"snippet {snippet!r} runs before each delivery of {webhook!r}"

    return registry


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def _generated(snippet: Snippet, submission: dict[str, str]) -> str:
    # What `wp_generate_password( 24 )` would return, made deterministic for the demo.
    seed = f"{snippet.name}\0{snippet.code}\0{sorted(submission.items())}"
    return hashlib.sha256(seed.encode()).hexdigest()[:24]


deployed = Site("2.3")
"""The site as deployed: core 2.3, so the extension starts."""

registry = build_registry(deployed)
"""The deployed site's registry: what ``veridic check`` and ``manifest.json`` describe."""
