"""History (Run, Sample), presets and saved prompts.

A Run is what the user kept of a Generation (the door's seven-day recovery
checkpoint): it copies the chosen choices out, so it never expires and survives the
checkpoint's purge.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.contrib.postgres.search import SearchQuery, SearchVector
from django.db import models, transaction
from django.db.models import Q
from django.utils import timezone

from completions import pipeline
from completions.models import Generation
from core.tokens import logprob_stats

# Search runs over prompt, title, note and sample texts with the "simple" config:
# no stemming or stop words, so any word a model wrote can be found as written.
SEARCH_CONFIG = "simple"
# Parameters the door adds for transport; a re-run or the editor does not need them.
TRANSPORT_PARAMS = ("stream", "stream_options")


def prompt_text(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    return json.dumps(prompt)


class RunQuerySet(models.QuerySet["Run"]):
    def for_user(self, user: Any) -> RunQuerySet:
        return self.filter(owner=user)

    def search(self, query: str) -> RunQuerySet:
        query = query.strip()
        if not query:
            return self
        if not any(ch.isalnum() for ch in query):
            # Punctuation-only queries have no words for full-text search to match.
            return self.filter(search_text__icontains=query)
        vector = SearchVector("search_text", config=SEARCH_CONFIG)
        return self.annotate(search_vector=vector).filter(
            search_vector=SearchQuery(query, config=SEARCH_CONFIG, search_type="websearch")
        )

    def filtered(
        self,
        *,
        query: str = "",
        model: str = "",
        since: dt.date | None = None,
        until: dt.date | None = None,
    ) -> RunQuerySet:
        runs = self.search(query)
        if model:
            runs = runs.filter(Q(model=model) | Q(served_model=model))
        if since:
            runs = runs.filter(saved_at__date__gte=since)
        if until:
            runs = runs.filter(saved_at__date__lte=until)
        return runs

    @transaction.atomic
    def save_generation(
        self,
        generation: Generation,
        *,
        title: str = "",
        note: str = "",
        choice_indexes: Iterable[int] | None = None,
        result: dict[str, Any] | None = None,
        also: Iterable[Generation] = (),
    ) -> Run:
        """Copy the chosen choices (default: all) out of the checkpoint into a new
        History entry and claim the generation so it leaves Recover.

        `result` is what the result page shows (an Inspect token table, choice
        ranking or comparison), kept with the run so it outlives the checkpoint;
        `also` are further generations of the same result (the second side of a
        compare across models), whose choices follow as further samples."""
        row = Generation.objects.select_for_update().get(pk=generation.pk)
        if not row.is_terminal:
            raise ValueError("a generation can be saved once it has finished")
        if result is None and row.kind == "inspect" and "mode" in (row.target or {}):
            result = row.target  # saved from Recover or the Workbench: still the whole result
        choices = list(row.choices)
        if choice_indexes is not None:
            wanted = {int(i) for i in choice_indexes}
            choices = [c for c in choices if int(c.get("index", -1)) in wanted]
        params = {k: v for k, v in (row.params or {}).items() if k not in TRANSPORT_PARAMS}
        run = self.create(
            owner_id=row.owner_id,
            generation=row,
            number=row.pk,
            kind=row.kind,
            title=title.strip()[:200],
            note=note.strip(),
            prompt=prompt_text(params.get("prompt", "")),
            params=params,
            model=str(params.get("model") or ""),
            served_model=row.served_model,
            request_id=row.request_id,
            state=row.state,
            error_code=row.error_code,
            error_message=row.error_message,
            usage=row.usage,
            generated_at=row.created_at,
            result=result,
        )
        extra = [Generation.objects.select_for_update().get(pk=g.pk) for g in also]
        offset = 1 + max((int(c.get("index", 0)) for c in choices), default=-1)
        for other in extra:
            more = sorted(other.choices or [], key=lambda c: int(c.get("index", 0)))
            choices += [{**c, "index": offset + i} for i, c in enumerate(more)]
            offset += len(more)
        samples: list[Sample] = []
        for choice in choices:
            count, mean = logprob_stats(choice.get("logprobs"))
            samples.append(
                Sample(
                    run=run,
                    index=int(choice.get("index", len(samples))),
                    text=choice.get("text") or "",
                    finish_reason=choice.get("finish_reason") or "",
                    stop_reason=_text_or_empty(choice.get("stop_reason")),
                    logprobs=choice.get("logprobs"),
                    prompt_logprobs=choice.get("prompt_logprobs"),
                    token_count=choice.get("completion_tokens") if count is None else count,
                    mean_logprob=mean,
                )
            )
        Sample.objects.bulk_create(samples)
        run.search_text = "\n".join([run.title, run.note, run.prompt, *(s.text for s in samples)])
        run.save(update_fields=["search_text"])
        row.claim()
        for other in extra:
            other.claim()
        return run


def _text_or_empty(value: Any) -> str:
    # vLLM's stop_reason is the matched string, or a token id when an EOS stopped it.
    return "" if value is None else str(value)


class Run(models.Model):
    """A saved History entry."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="workbench_runs"
    )
    # The checkpoint it came from, while that still exists (purged after 7 days).
    generation = models.ForeignKey(
        Generation, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    # The run's one number: the generation's, which the Workbench shows ("run 29"),
    # kept when the checkpoint is purged.
    number = models.BigIntegerField(null=True, blank=True)
    kind = models.CharField(max_length=16, default="workbench")
    title = models.CharField(max_length=200, blank=True)
    note = models.TextField(blank=True)
    prompt = models.TextField(blank=True)
    params = models.JSONField(default=dict, help_text="The request body as sent.")
    model = models.CharField(max_length=200, blank=True, help_text="The short id asked for.")
    served_model = models.CharField(max_length=300, blank=True, help_text="The checkpoint.")
    request_id = models.CharField(max_length=200, blank=True)
    state = models.CharField(max_length=16, default="done")
    error_code = models.CharField(max_length=100, blank=True)
    error_message = models.TextField(blank=True)
    usage = models.JSONField(null=True, blank=True)
    generated_at = models.DateTimeField(null=True, blank=True)
    saved_at = models.DateTimeField(auto_now_add=True)
    search_text = models.TextField(blank=True, editable=False)
    # An Inspect result as its page shows it (token table, choice ranking, both
    # sides of a compare): the checkpoint it was computed from is purged in 7 days.
    result = models.JSONField(null=True, blank=True)

    objects = RunQuerySet.as_manager()

    class Meta:
        ordering = ["-saved_at", "-pk"]
        indexes = [
            models.Index(fields=["owner", "-saved_at"], name="run_owner_saved"),
            models.Index(fields=["owner", "model"], name="run_owner_model"),
        ]
        # The GIN index for search (run_search) is created in migration 0002 with SQL:
        # GinIndex needs django.contrib.postgres in INSTALLED_APPS, which we do not use.

    def __str__(self) -> str:
        return self.title or self.label

    @property
    def label(self) -> str:
        """ "run 29": the number the Workbench showed for it."""
        return f"run {self.number}" if self.number is not None else f"History entry {self.pk}"

    @property
    def display_title(self) -> str:
        if self.title:
            return self.title
        words = " ".join(self.prompt.split())
        return (words[:70] + "…") if len(words) > 70 else (words or "(empty prompt)")

    @property
    def request_params(self) -> dict[str, Any]:
        """The settings to run again: the request as sent, seed included."""
        return dict(self.params)

    def rerun(self) -> Generation:
        """Start the same request again (same settings and seed) as a new Workbench run."""
        return pipeline.start(self.owner, self.request_params, kind="workbench")

    def export_dict(self, samples: Iterable[Sample] | None = None) -> dict[str, Any]:
        samples = self.samples.all() if samples is None else samples
        return {
            "id": self.pk,
            "run": self.number,
            "kind": self.kind,
            "title": self.title,
            "note": self.note,
            "prompt": self.params.get("prompt", self.prompt),
            "parameters": self.params,
            "model": self.model,
            "model_checkpoint": self.served_model,
            "request_id": self.request_id,
            "state": self.state,
            "error_code": self.error_code,
            "usage": self.usage,
            "generated_at": self.generated_at.isoformat() if self.generated_at else None,
            "saved_at": self.saved_at.isoformat(),
            "samples": [s.export_dict() for s in samples],
            **({"result": self.result} if self.result else {}),
        }


class Sample(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="samples")
    index = models.PositiveIntegerField(help_text="The choice index in the response.")
    text = models.TextField(blank=True)
    finish_reason = models.CharField(max_length=32, blank=True)
    stop_reason = models.CharField(max_length=200, blank=True)
    logprobs = models.JSONField(null=True, blank=True)
    prompt_logprobs = models.JSONField(null=True, blank=True)
    token_count = models.PositiveIntegerField(null=True, blank=True)
    mean_logprob = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["run", "index"]
        constraints = [
            models.UniqueConstraint(fields=["run", "index"], name="sample_run_index_unique")
        ]

    def __str__(self) -> str:
        return f"sample {self.index} of run {self.run_id}"

    @property
    def perplexity(self) -> float | None:
        return math.exp(-self.mean_logprob) if self.mean_logprob is not None else None

    def export_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "index": self.index,
            "text": self.text,
            "finish_reason": self.finish_reason or None,
            "stop_reason": self.stop_reason or None,
        }
        if self.logprobs:
            out["tokens"] = self.logprobs.get("tokens")
            out["token_logprobs"] = self.logprobs.get("token_logprobs")
            out["top_logprobs"] = self.logprobs.get("top_logprobs")
            out["text_offset"] = self.logprobs.get("text_offset")
        if self.prompt_logprobs:
            out["prompt_logprobs"] = self.prompt_logprobs
        return out

    def export_line(self) -> dict[str, Any]:
        """One JSONL line: the sample with everything needed to reproduce it."""
        run = self.run
        return {
            "run_id": run.pk,
            "title": run.title,
            "prompt": run.params.get("prompt", run.prompt),
            "parameters": run.params,
            "model": run.model,
            "model_checkpoint": run.served_model,
            "request_id": run.request_id,
            **self.export_dict(),
        }


class NamedParams(models.Model):
    """What a Preset and a SavedPrompt share: a user's named parameter set, one name
    per user and kind, listed by name. The owner is each one's own (its reverse name
    differs); so is the name's length."""

    name = models.CharField(max_length=200)
    params = models.JSONField(default=dict)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="%(class)s_owner_name_unique")
        ]

    def __str__(self) -> str:
        return self.name


class Preset(NamedParams):
    """A named parameter set (everything but the prompt)."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="workbench_presets"
    )
    name = models.CharField(max_length=100)


class SavedPrompt(NamedParams):
    """A named prompt with its settings; opening it fills the editor."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="workbench_prompts"
    )
    prompt = models.TextField(blank=True)

    @property
    def body(self) -> dict[str, Any]:
        return {**self.params, "prompt": self.prompt}


# How many runs the page keeps showing after a reload (newest first).
DRAFT_RUNS = 6
DRAFT_PAGES = 8  # pages whose save numbers a draft remembers


class DraftQuerySet(models.QuerySet["Draft"]):
    def of(self, user: Any) -> Draft:
        """The user's draft (an empty one when they have none yet; not saved)."""
        return self.filter(owner=user).first() or Draft(owner=user)


class Draft(models.Model):
    """What the Workbench holds for a user between page loads: the prompt and every
    setting exactly as typed (an invalid value too, so nothing typed is lost), and the
    runs the page shows. Server-side, so it follows the user to another browser."""

    owner = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="workbench_draft"
    )
    # Form field name -> the text typed (booleans as booleans), see workbench.drafts.
    values = models.JSONField(default=dict)
    # Generation ids shown on the page, newest first.
    runs = models.JSONField(default=list)
    updated_at = models.DateTimeField(auto_now=True)
    # [page, number] of the newest save kept from each of the last DRAFT_PAGES pages
    # that saved (a random id per page load, its saves numbered 1, 2, …), oldest
    # first. A debounced save still in flight when the leaving page's beacon carries
    # newer text can arrive last, even after the next page's first save; its lower
    # number says it is older.
    save_numbers = models.JSONField(default=list)

    objects = DraftQuerySet.as_manager()

    def __str__(self) -> str:
        return f"draft of user {self.owner_id}"

    @transaction.atomic
    def show_run(self, generation: Generation) -> None:
        """Put a run at the top of the page's list (kept to DRAFT_RUNS)."""
        row, _ = Draft.objects.select_for_update().get_or_create(owner_id=self.owner_id)
        ids = [generation.pk, *(i for i in row.runs if i != generation.pk)][:DRAFT_RUNS]
        Draft.objects.filter(pk=row.pk).update(runs=ids)
        self.pk, self.runs = row.pk, ids

    @transaction.atomic
    def hide_run(self, generation: Generation) -> None:
        row = Draft.objects.select_for_update().filter(owner_id=self.owner_id).first()
        if row is not None:
            row.runs = [i for i in row.runs if i != generation.pk]
            Draft.objects.filter(pk=row.pk).update(runs=row.runs)
            self.runs = row.runs

    @transaction.atomic
    def update_values(self, values: dict[str, Any], *, page: str = "", seq: int = 0) -> bool:
        """Merge what the page sent into the stored values (a field not sent keeps its
        stored value). The runs list is left alone: only Run and dismiss change it.

        A numbered save (`seq` of page `page`) older than, or the same as, the newest
        one kept from that page is ignored, so the newest typing wins whatever order
        the saves arrive in; the first save of a new page (a reload, another browser)
        is kept. Returns whether the values were kept."""
        row, _ = Draft.objects.select_for_update().get_or_create(owner_id=self.owner_id)
        newest = dict(row.save_numbers or [])  # page -> number, in order of last save
        if page and seq:
            if seq <= newest.get(page, 0):
                self.pk, self.values = row.pk, row.values
                return False
            newest.pop(page, None)
            newest[page] = seq
        numbers = [[p, n] for p, n in newest.items()][-DRAFT_PAGES:]
        merged = {**row.values, **values}
        Draft.objects.filter(pk=row.pk).update(
            values=merged, updated_at=timezone.now(), save_numbers=numbers
        )
        self.pk, self.values = row.pk, merged
        return True
