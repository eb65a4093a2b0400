"""Agent conversations with tool calls built from tau-bench's retail tasks, for
``procedural_recall.py``: a development set, deterministic for a seed.

``../shared/bench/tau_retail/tasks_train.jsonl`` (MIT, tau-bench) gives, per task, the user's
instruction (who they are, their persona, and terse requests such as ``Return #W6067464 via
credit_card_4190576: Electric Kettle; Wall Clock;``) and the gold write actions with their
arguments. From each task this module writes a conversation in the OpenAI chat format the way
an agent following the domain's policy would hold it:

- the user's request in natural words: one of several templates per intent (cancel, return,
  exchange, change the items of a pending order, its address, its payment), the persona
  dropped, the order id given or not ("the order with the kettle"), the payment method named
  as a person would ("my PayPal", "the Visa ending 4321") rather than by its id; with several
  requests, stated all at once or one after another (the next once the previous is done);
- the reads a real agent makes, varied: authentication by email or by name and zip
  (``find_user_id_by_*``), ``get_user_details``, ``get_order_details`` (of the order named,
  or of several to find the one the user means), ``get_product_details`` for an exchange or a
  change of items (sometimes skipped), an occasional ``calculate`` or ``think``; each
  answered with plausible JSON holding the ids the writes later use (payment method ids in
  the user's details, item ids in the order's, new item ids among the product's variants),
  so where an argument came from is learnable;
- the confirmation the policy asks for (the agent lists the action, the user says yes), then
  the gold write actions with their arguments, each answered by the tool.

:func:`build` also writes failed conversations of the same kind of task: a write step
missing, two steps misordered, a wrong write tool called, or the agent stopping before
any write (the user gives up); outcome ``failure``, and ``partial`` for a conversation that
did the first of several writes and stopped. ``query_for`` phrases an unseen task as the
request a user opens with (all of its requests, its own wording).
"""

from __future__ import annotations

import ast
import hashlib
import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.harness import REPO

TAU = REPO.parent / "shared" / "bench" / "tau_retail"

WRITE_TOOLS = (
    "cancel_pending_order",
    "return_delivered_order_items",
    "exchange_delivered_order_items",
    "modify_pending_order_items",
    "modify_pending_order_address",
    "modify_pending_order_payment",
)
READ_TOOLS = (
    "find_user_id_by_email",
    "find_user_id_by_name_zip",
    "get_user_details",
    "get_order_details",
    "get_product_details",
    "list_all_product_types",
    "calculate",
    "think",
)

_IDENTITY = re.compile(
    r"Your name is (?P<first>\S+) (?P<last>\S+) and your "
    r"(?:zip code is (?P<zip>\d+)|email is (?P<email>\S+?))\. You are [a-z, ]+\. (?P<rest>.*)$",
    re.S,
)
_SEGMENT = re.compile(
    r"(?=Cancel order #W\d+|Return #W\d+|For #W\d+, (?:exchange|modify|change address|"
    r"change payment))"
)
_ITEM = re.compile(r"([A-Z][A-Za-z\- ]*?) (\{[^{}]*\}) to (\{[^{}]*\})")


@dataclass
class Action:
    name: str
    kwargs: dict[str, Any]
    # From the instruction: product names (returns, exchanges, changes) and their options.
    items: list[tuple[str, dict[str, str], dict[str, str]]] = field(default_factory=list)


@dataclass
class Task:
    task_id: int
    user_id: str
    first: str
    last: str
    zip: str | None
    email: str | None
    actions: list[Action]

    @property
    def gold(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.actions)


@dataclass
class Conversation:
    task_id: int
    messages: list[dict[str, Any]]  # OpenAI chat format
    outcome: str  # success, failure, partial
    writes: tuple[str, ...]  # the write tools called, in order
    kind: str  # success, or how it failed


def load_tasks(path: Path = TAU / "tasks_train.jsonl") -> list[Task]:
    tasks = []
    for line in path.read_text().splitlines():
        raw = json.loads(line)
        m = _IDENTITY.match(raw["instruction"])
        if m is None:
            raise ValueError(f"task {raw['task_id']}: unexpected instruction")
        segments = [s.strip() for s in _SEGMENT.split(m["rest"]) if s.strip()]
        actions = []
        for i, a in enumerate(raw["actions"]):
            items: list[tuple[str, dict[str, str], dict[str, str]]] = []
            seg = segments[i] if i < len(segments) else ""
            if seg.startswith("Return"):
                names = seg.split(":", 1)[1] if ":" in seg else ""
                items = [(n.strip(), {}, {}) for n in names.split(";") if n.strip()]
            else:
                for name, old, new in _ITEM.findall(seg):
                    items.append(
                        (name.strip(), ast.literal_eval(old), ast.literal_eval(new))  # type: ignore[arg-type]
                    )
            actions.append(Action(a["name"], dict(a["kwargs"]), items))
        tasks.append(
            Task(
                task_id=raw["task_id"],
                user_id=raw["user_id"],
                first=m["first"],
                last=m["last"],
                zip=m["zip"],
                email=m["email"],
                actions=actions,
            )
        )
    return tasks


# ---- the world a conversation reads: plausible tool results ---------------------------------


def _digits(seed: str, n: int = 10) -> str:
    return str(int(hashlib.sha256(seed.encode()).hexdigest(), 16))[:n]


def _pm_label(pm: str) -> tuple[str, str]:
    """(how the user says it, the record in the user's details) for a payment method id."""
    kind, _, number = pm.rpartition("_")
    last4 = number[-4:]
    if kind == "credit_card":
        brand = ["visa", "mastercard"][int(number) % 2]
        return f"{'Visa' if brand == 'visa' else 'Mastercard'} ending in {last4}", json.dumps(
            {"source": "credit_card", "brand": brand, "last_four": last4, "id": pm}
        )
    if kind == "gift_card":
        return "gift card", json.dumps(
            {"source": "gift_card", "balance": int(number) % 300 + 20, "id": pm}
        )
    return "PayPal", json.dumps({"source": "paypal", "id": pm})


def _pm_words(pm: str, rng: random.Random) -> str:
    said, _ = _pm_label(pm)
    if said == "PayPal":
        return rng.choice(["my PayPal", "PayPal", "my PayPal account"])
    if said == "gift card":
        return rng.choice(["my gift card", "the gift card balance", "the gift card"])
    return rng.choice([f"my {said}", f"the card ending in {said[-4:]}", f"my {said.split()[0]}"])


@dataclass
class World:
    """What the reads of one conversation return."""

    task: Task
    rng: random.Random
    orders: dict[str, dict[str, Any]] = field(default_factory=dict)
    products: dict[str, dict[str, Any]] = field(default_factory=dict)
    payment_methods: dict[str, Any] = field(default_factory=dict)
    address: dict[str, str] = field(default_factory=dict)

    @staticmethod
    def of(task: Task, rng: random.Random) -> World:
        w = World(task, rng)
        cities = [("Denver", "CO", "80265"), ("Austin", "TX", "78701"), ("Chicago", "IL", "60642")]
        city, state, zip_ = cities[task.task_id % len(cities)]
        w.address = {
            "address1": f"{100 + task.task_id} {rng.choice(['Elm', 'Oak', 'Pine', 'Maple'])} Street",
            "address2": f"Suite {task.task_id % 900 + 100}",
            "city": city,
            "country": "USA",
            "state": state,
            "zip": task.zip or zip_,
        }
        pms: list[str] = []
        for a in task.actions:
            pm = a.kwargs.get("payment_method_id")
            if pm and pm not in pms:
                pms.append(pm)
        if not pms or rng.random() < 0.5:
            pms.append(f"gift_card_{_digits(task.user_id + 'gc', 7)}")
        w.payment_methods = {pm: json.loads(_pm_label(pm)[1]) for pm in pms}
        for a in task.actions:
            oid = a.kwargs["order_id"]
            order = w.orders.setdefault(
                oid,
                {
                    "order_id": oid,
                    "user_id": task.user_id,
                    "address": dict(w.address),
                    "items": [],
                    "status": "pending",
                    "payment_history": [
                        {
                            "transaction_type": "payment",
                            "amount": round(rng.uniform(40, 900), 2),
                            "payment_method_id": pms[0],
                        }
                    ],
                },
            )
            if a.name in ("return_delivered_order_items", "exchange_delivered_order_items"):
                order["status"] = "delivered"
            old_ids = list(a.kwargs.get("item_ids") or [])
            new_ids = list(a.kwargs.get("new_item_ids") or [])
            names = [n for n, _, _ in a.items] or [
                rng.choice(["Desk Lamp", "T-Shirt", "Sneakers", "Bookshelf", "Headphones"])
            ]
            for i, item_id in enumerate(old_ids):
                name, options, changes = a.items[i] if i < len(a.items) else (names[0], {}, {})
                if not options:
                    options = {"color": rng.choice(["black", "white", "blue", "red"])}
                product_id = _digits("product" + name)
                if not any(it["item_id"] == item_id for it in order["items"]):
                    order["items"].append(
                        {
                            "name": name,
                            "product_id": product_id,
                            "item_id": item_id,
                            "price": round(rng.uniform(20, 500), 2),
                            "options": options,
                        }
                    )
                product = w.products.setdefault(
                    product_id, {"name": name, "product_id": product_id, "variants": {}}
                )
                product["variants"][item_id] = {
                    "item_id": item_id,
                    "options": options,
                    "available": True,
                    "price": order["items"][-1]["price"],
                }
                if i < len(new_ids):
                    product["variants"][new_ids[i]] = {
                        "item_id": new_ids[i],
                        "options": {**options, **changes},
                        "available": True,
                        "price": round(rng.uniform(20, 500), 2),
                    }
                for k in range(rng.randint(1, 3)):  # other variants
                    vid = _digits(f"{product_id}-{k}")
                    product["variants"].setdefault(
                        vid,
                        {
                            "item_id": vid,
                            "options": {**options, "color": rng.choice(["green", "grey"])},
                            "available": rng.random() < 0.7,
                            "price": round(rng.uniform(20, 500), 2),
                        },
                    )
            if not order["items"]:  # a cancel, an address or payment change
                for _ in range(rng.randint(1, 3)):
                    name = rng.choice(
                        ["Water Bottle", "Desk Lamp", "Yoga Mat", "Tea Kettle", "Backpack"]
                    )
                    order["items"].append(
                        {
                            "name": name,
                            "product_id": _digits("product" + name),
                            "item_id": _digits(f"{oid}{name}{len(order['items'])}"),
                            "price": round(rng.uniform(20, 500), 2),
                            "options": {"color": rng.choice(["black", "white"])},
                        }
                    )
        # Other orders of the user, which an agent may read while looking for the right one.
        for k in range(rng.randint(0, 2)):
            oid = f"#W{_digits(task.user_id + str(k), 7)}"
            w.orders.setdefault(
                oid,
                {
                    "order_id": oid,
                    "user_id": task.user_id,
                    "address": dict(w.address),
                    "items": [
                        {
                            "name": "Notebook",
                            "product_id": _digits("productNotebook"),
                            "item_id": _digits(oid + "nb"),
                            "price": 12.5,
                            "options": {"pages": "200"},
                        }
                    ],
                    "status": rng.choice(["delivered", "processed", "pending"]),
                    "payment_history": [],
                },
            )
        return w

    def user_details(self) -> dict[str, Any]:
        t = self.task
        return {
            "user_id": t.user_id,
            "name": {"first_name": t.first, "last_name": t.last},
            "address": self.address,
            "email": t.email or f"{t.first.lower()}.{t.last.lower()}@example.com",
            "payment_methods": self.payment_methods,
            "orders": sorted(self.orders),
        }


# ---- wording ----------------------------------------------------------------------------------


def _oid_words(oid: str, rng: random.Random) -> str:
    return rng.choice([oid, oid, f"order {oid}", oid.lstrip("#"), f"order number {oid}"])


def _list(names: list[str]) -> str:
    names = [n.lower() for n in names]
    if len(names) <= 1:
        return names[0] if names else "item"
    return ", ".join(names[:-1]) + " and " + names[-1]


def _changes(changes: dict[str, str]) -> str:
    if not changes:
        return "the same one again (a fresh unit)"
    return ", ".join(f"{v} {k}" if k not in ("color",) else v for k, v in changes.items())


_GREETINGS = ["", "", "Hi. ", "Hello! ", "Hey there! ", "Good morning. ", "Hi, hope you're well! "]


def request_words(a: Action, rng: random.Random, *, say_order: bool) -> str:
    """One request in the user's words (never the instruction's text)."""
    oid = a.kwargs["order_id"]
    names = [n for n, _, _ in a.items]
    what = _list(names) if names else "something"
    where = _oid_words(oid, rng) if say_order else f"the order with the {what}"
    where_short = _oid_words(oid, rng) if say_order else "my recent order"
    if a.name == "cancel_pending_order":
        reason = a.kwargs.get("reason", "no longer needed")
        why = (
            rng.choice(["I ordered it by mistake", "it was a mistake", "I clicked buy by accident"])
            if "mistake" in reason
            else rng.choice(["I don't need it anymore", "it's no longer needed", "plans changed"])
        )
        return rng.choice(
            [
                f"I need to cancel {where_short}, {why}.",
                f"Could you cancel {where_short} for me? {why.capitalize()}.",
                f"Please call off {where_short} — {why}.",
                f"I placed {where_short} but {why}, so I'd like it cancelled.",
                f"I want to cancel an order that hasn't shipped yet ({where_short}); {why}.",
            ]
        )
    pm = a.kwargs.get("payment_method_id", "")
    pay = _pm_words(pm, rng) if pm else "the original payment method"
    if a.name == "return_delivered_order_items":
        return rng.choice(
            [
                f"I'd like to return the {what} from {where}. Refund to {pay}, please.",
                f"Can I send back the {what} I received ({where_short})? Put the money on {pay}.",
                f"The {what} from {where_short} didn't work out, I want to return "
                f"{'them' if len(names) > 1 else 'it'} and get refunded to {pay}.",
                f"I want a refund for the {what} in {where_short}; please use {pay}.",
            ]
        )
    if a.name == "exchange_delivered_order_items":
        change = "; ".join(f"the {n.lower()} for {_changes(c)}" for n, _, c in a.items) or what
        return rng.choice(
            [
                f"I received {where_short} and I'd like to exchange {change}. Any price "
                f"difference can go on {pay}.",
                f"Can I swap {change}? It's from {where_short}, already delivered. Use {pay} "
                "for the difference.",
                f"The {what} I got isn't right — I want to exchange {change} ({where_short}), "
                f"paying any difference with {pay}.",
            ]
        )
    if a.name == "modify_pending_order_items":
        change = "; ".join(f"the {n.lower()} to {_changes(c)}" for n, _, c in a.items) or what
        return rng.choice(
            [
                f"{where_short[0].upper() + where_short[1:]} hasn't shipped yet — can you "
                f"change {change}? Charge or refund the difference via {pay}.",
                f"Before {where_short} ships I'd like to switch {change}, using {pay} for "
                "any difference.",
                f"I want to modify the items in {where_short}: {change}. Use {pay}.",
            ]
        )
    if a.name == "modify_pending_order_address":
        k = a.kwargs
        addr = f"{k.get('address1')}, {k.get('address2')}, {k.get('city')}, {k.get('state')} "
        addr += str(k.get("zip"))
        return rng.choice(
            [
                f"Please ship {where_short} to {addr} instead.",
                f"I need to update the delivery address on {where_short} to {addr}.",
                f"Could {where_short} go to a different address? It should be {addr}.",
            ]
        )
    if a.name == "modify_pending_order_payment":
        return rng.choice(
            [
                f"I'd like to pay for {where_short} with {pay} instead.",
                f"Can you switch the payment on {where_short} to {pay}?",
                f"Please change how {where_short} is paid: use {pay}.",
            ]
        )
    return f"I need help with {where_short}."


_JOINERS = [" Also, ", " And ", " Then ", " One more thing: ", " Besides that, "]


def query_for(task: Task, seed: int) -> str:
    """An unseen task's opening request, all of its requests, as the query."""
    rng = random.Random(f"query-{seed}-{task.task_id}")
    parts = [request_words(a, rng, say_order=rng.random() < 0.75) for a in task.actions]
    text = rng.choice(_GREETINGS) + parts[0]
    for p in parts[1:]:
        text += rng.choice(_JOINERS) + p[0].lower() + p[1:]
    return text


# ---- conversations ----------------------------------------------------------------------------


class _Writer:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.n = 0

    def user(self, text: str) -> None:
        self.messages.append({"role": "user", "content": text})

    def say(self, text: str) -> None:
        self.messages.append({"role": "assistant", "content": text})

    def call(self, tool: str, arguments: dict[str, Any], result: Any, said: str = "") -> None:
        self.n += 1
        cid = f"call_{self.n}"
        self.messages.append(
            {
                "role": "assistant",
                "content": said,
                "tool_calls": [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {"name": tool, "arguments": json.dumps(arguments)},
                    }
                ],
            }
        )
        self.messages.append(
            {
                "role": "tool",
                "tool_call_id": cid,
                "name": tool,
                "content": result if isinstance(result, str) else json.dumps(result),
            }
        )


def _summary_of(a: Action) -> str:
    k = a.kwargs
    if a.name == "cancel_pending_order":
        return f"cancel order {k['order_id']} (reason: {k.get('reason')})"
    if a.name == "return_delivered_order_items":
        return f"return items {', '.join(k['item_ids'])} of {k['order_id']}, refund to {k['payment_method_id']}"
    if a.name in ("exchange_delivered_order_items", "modify_pending_order_items"):
        verb = "exchange" if a.name.startswith("exchange") else "change"
        pairs = ", ".join(
            f"{o} -> {n}" for o, n in zip(k["item_ids"], k["new_item_ids"], strict=False)
        )
        return f"{verb} {pairs} in {k['order_id']}, difference via {k['payment_method_id']}"
    if a.name == "modify_pending_order_address":
        return f"ship {k['order_id']} to {k['address1']}, {k['city']} {k['zip']}"
    return f"pay {k['order_id']} with {k.get('payment_method_id')}"


_YES = ["Yes, go ahead.", "Yes please.", "yes", "Confirmed.", "That's right, proceed.", "Yes!"]
_DONE = [
    "Done: {what}. Anything else?",
    "All set — {what}. Is there anything else I can help with?",
    "It's done ({what}).",
]
_BYE = ["No, that's all. Thanks!", "Great, thank you.", "That's everything, bye.", "Thanks!"]


def _write_result(a: Action, world: World) -> dict[str, Any]:
    order = dict(world.orders[a.kwargs["order_id"]])
    status = {
        "cancel_pending_order": "cancelled",
        "return_delivered_order_items": "return requested",
        "exchange_delivered_order_items": "exchange requested",
    }.get(a.name, order["status"])
    return {"order_id": order["order_id"], "status": status, "user_id": order["user_id"]}


def conversation(task: Task, rng: random.Random, actions: list[Action] | None = None) -> Any:
    """The messages of an agent handling ``task``, writing ``actions`` (the gold ones by
    default); returns (messages, writes done)."""
    actions = task.actions if actions is None else actions
    world = World.of(task, rng)
    w = _Writer()
    say_order = {a.kwargs["order_id"]: rng.random() < 0.7 for a in task.actions}
    upfront = len(task.actions) == 1 or rng.random() < 0.6
    requests = [
        request_words(a, rng, say_order=say_order[a.kwargs["order_id"]]) for a in task.actions
    ]
    opening = rng.choice(_GREETINGS)
    if upfront:
        opening += requests[0]
        for r in requests[1:]:
            opening += rng.choice(_JOINERS) + r[0].lower() + r[1:]
    else:
        opening += requests[0]
    by_email = task.email is not None and (task.zip is None or rng.random() < 0.5)
    ident = (
        rng.choice([f"My email is {task.email}.", f"It's {task.email}", f"{task.email}"])
        if by_email
        else rng.choice(
            [
                f"I'm {task.first} {task.last}, zip code {task.zip}.",
                f"{task.first} {task.last}, {task.zip}",
                f"Name's {task.first} {task.last} and my zip is {task.zip}.",
            ]
        )
    )
    if task.zip is None and not by_email:  # email only
        by_email = True
    if rng.random() < 0.25:  # identifies at once
        w.user(opening + " " + ident)
    else:
        w.user(opening)
        w.say(
            rng.choice(
                [
                    "I can help with that. First, please confirm your identity: your email, "
                    "or your name and zip code.",
                    "Sure. Could you give me your email address, or your full name and zip "
                    "code, so I can find your account?",
                    "Happy to help. To authenticate you, what's your email (or name and zip)?",
                ]
            )
        )
        w.user(ident)
    if by_email:
        w.call("find_user_id_by_email", {"email": task.email}, task.user_id)
    else:
        w.call(
            "find_user_id_by_name_zip",
            {"first_name": task.first, "last_name": task.last, "zip": task.zip},
            task.user_id,
        )
    details = world.user_details()
    w.call("get_user_details", {"user_id": task.user_id}, details)

    read_orders: set[str] = set()
    done: list[str] = []

    def read_for(a: Action) -> None:
        oid = a.kwargs["order_id"]
        if oid not in read_orders:
            if not say_order[oid]:  # look for it among the user's orders
                for other in details["orders"]:
                    if other == oid:
                        break
                    if other not in read_orders and rng.random() < 0.6:
                        w.call("get_order_details", {"order_id": other}, world.orders[other])
                        read_orders.add(other)
            w.call("get_order_details", {"order_id": oid}, world.orders[oid])
            read_orders.add(oid)
        if a.name in ("exchange_delivered_order_items", "modify_pending_order_items"):
            seen: set[str] = set()
            for item in world.orders[oid]["items"]:
                if item["item_id"] in a.kwargs["item_ids"] and item["product_id"] not in seen:
                    seen.add(item["product_id"])
                    if rng.random() < 0.85:
                        w.call(
                            "get_product_details",
                            {"product_id": item["product_id"]},
                            world.products[item["product_id"]],
                        )
        if rng.random() < 0.12:
            w.call(
                "calculate",
                {"expression": f"{rng.uniform(20, 400):.2f} - {rng.uniform(20, 400):.2f}"},
                f"{rng.uniform(-200, 200):.2f}",
            )
        if rng.random() < 0.08:
            w.call("think", {"thought": "Check the order's status allows this."}, "ok")

    pending_requests = list(range(1, len(task.actions)))
    for i, a in enumerate(actions):
        read_for(a)
        w.say(
            rng.choice(
                [
                    f"Here is what I'll do: {_summary_of(a)}. Shall I proceed?",
                    f"To confirm: {_summary_of(a)}. Do you want me to go ahead (yes/no)?",
                    f"I can {_summary_of(a)}. Please confirm with yes.",
                ]
            )
        )
        w.user(rng.choice(_YES))
        said = rng.choice(["", "", "Processing that now."])
        w.call(a.name, a.kwargs, _write_result(a, world), said=said)
        done.append(a.name)
        w.say(rng.choice(_DONE).format(what=_summary_of(a)))
        if not upfront and pending_requests and i + 1 < len(actions):
            w.user(requests[pending_requests.pop(0)])
    if not actions:  # stopped before any write
        for a in task.actions[:1]:
            read_for(a)
        w.say(
            rng.choice(
                [
                    "I'm sorry, I can't complete that request.",
                    "I wasn't able to do that; would you like me to transfer you?",
                ]
            )
        )
        w.user(rng.choice(["Never mind then.", "Forget it.", "Ugh, ok."]))
        return w.messages, tuple(done)
    w.user(rng.choice(_BYE))
    return w.messages, tuple(done)


_WRONG = {
    "cancel_pending_order": "modify_pending_order_items",
    "return_delivered_order_items": "exchange_delivered_order_items",
    "exchange_delivered_order_items": "return_delivered_order_items",
    "modify_pending_order_items": "cancel_pending_order",
    "modify_pending_order_address": "modify_user_address",
    "modify_pending_order_payment": "modify_pending_order_items",
}


def _wrong(a: Action) -> Action:
    name = _WRONG[a.name]
    kwargs = dict(a.kwargs)
    if name == "cancel_pending_order":
        kwargs = {"order_id": a.kwargs["order_id"], "reason": "no longer needed"}
    elif name == "return_delivered_order_items":
        kwargs.pop("new_item_ids", None)
    elif name in ("exchange_delivered_order_items", "modify_pending_order_items"):
        kwargs.setdefault("item_ids", [])
        kwargs.setdefault("new_item_ids", list(kwargs["item_ids"]))
        kwargs.setdefault("payment_method_id", "")
    return Action(name, kwargs, a.items)


def failed(task: Task, rng: random.Random) -> tuple[list[Action], str, str]:
    """A failed (or partly successful) way of handling the task: (writes, outcome, kind)."""
    acts = list(task.actions)
    choices = ["wrong tool", "no write"]
    if len(acts) > 1:
        choices += ["missing step", "missing step", "partial", "misordered"]
    kind = rng.choice(choices)
    if kind == "wrong tool":
        i = rng.randrange(len(acts))
        acts[i] = _wrong(acts[i])
        return acts, "failure", kind
    if kind == "no write":
        return [], "failure", kind
    if kind == "partial":
        return acts[:1], "partial", kind
    if kind == "misordered":
        if all(a.name == acts[0].name for a in acts):
            return acts[:-1], "failure", "missing step"
        i = next(i for i in range(len(acts) - 1) if acts[i].name != acts[i + 1].name)
        acts[i], acts[i + 1] = acts[i + 1], acts[i]
        return acts, "failure", kind
    del acts[rng.randrange(len(acts))]
    return acts, "failure", "missing step"


@dataclass
class DevSet:
    history: list[Conversation]
    unseen: list[tuple[Task, str]]  # (task, query)
    tasks: dict[int, Task]


def build(
    *, seed: int = 7, unseen: int = 100, failures: float = 0.25, limit: int | None = None
) -> DevSet:
    """Tasks shuffled with ``seed``; the first ``unseen`` are held out (asked as queries),
    the rest written as history: a share ``failures`` of them as failed or partial
    conversations, the others as successes."""
    tasks = load_tasks()
    order = list(range(len(tasks)))
    random.Random(seed).shuffle(order)
    if limit is not None:
        order = order[:limit]
    held, rest = order[:unseen], order[unseen:]
    history = []
    for i in rest:
        task = tasks[i]
        rng = random.Random(f"{seed}-{task.task_id}")
        if rng.random() < failures:
            acts, outcome, kind = failed(task, rng)
        else:
            acts, outcome, kind = task.actions, "success", "success"
        messages, writes = conversation(task, rng, acts)
        history.append(Conversation(task.task_id, messages, outcome, writes, kind))
    return DevSet(
        history=history,
        unseen=[(tasks[i], query_for(tasks[i], seed)) for i in held],
        tasks={t.task_id: t for t in tasks},
    )


def flatten(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same conversation as plain text: calls and results written into content."""
    out = []
    for m in messages:
        if m["role"] == "tool":
            out.append({"role": "assistant", "content": f"[{m['name']} returned] {m['content']}"})
        elif m.get("tool_calls"):
            calls = "; ".join(
                f"[calls {c['function']['name']}({c['function']['arguments']})]"
                for c in m["tool_calls"]
            )
            out.append({"role": "assistant", "content": (m["content"] + " " + calls).strip()})
        else:
            out.append({"role": m["role"], "content": m["content"]})
    return out


if __name__ == "__main__":  # a look at the set
    dev = build()
    c = dev.history[0]
    for m in c.messages:
        print(json.dumps(m)[:300])
    print(c.outcome, c.writes)
    from collections import Counter

    print(Counter(c.kind for c in dev.history))
    for t, q in dev.unseen[:5]:
        print(t.gold, "|", q)
