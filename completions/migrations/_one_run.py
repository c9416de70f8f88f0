"""Data and SQL of migration 0003 (one run model, one ledger). A module of its own (its
name starts with "_", so the loader does not take it for a migration)."""

from django.conf import settings

from config import lanes


def accounts_and_lanes(apps, schema_editor) -> None:
    """Every pages month row becomes the account `pages:<user>`; every run gets its lane
    and its queue (a queued one is then claimed from there)."""
    BudgetMonth = apps.get_model("completions", "BudgetMonth")
    Generation = apps.get_model("completions", "Generation")
    for row in BudgetMonth.objects.filter(account="").iterator():
        BudgetMonth.objects.filter(pk=row.pk).update(account=f"pages:{row.user_id}")
    prefix = settings.WEFT_GENERATION_QUEUE
    for lane, workload in (("batch", "batch"),):
        Generation.objects.filter(workload=workload).update(
            lane=lane, queue=lanes.queue_of_lane(lane, prefix)
        )
    Generation.objects.filter(queue="").update(
        lane="interactive", queue=lanes.queue_of_lane("interactive", prefix)
    )


# The ledger's one rule, applied under the accounts' locks (completions.budget): the
# month rows are created if missing, every account of the reservation locked in account
# order (two callers never deadlock), how many tokens per choice fit computed against the
# tightest account, and — when all of max_tokens fits, or with p_clamp when at least one
# token does — prompt + choices × fit added to every account. Returns the fit (capped at
# max_tokens) and what was left, reserved or not.
RESERVE_FUNCTION = """
CREATE OR REPLACE FUNCTION weft_reserve(
    p_accounts text[], p_budgets bigint[], p_user bigint, p_month date,
    p_prompt bigint, p_choices integer, p_max_tokens bigint, p_clamp boolean,
    OUT fit bigint, OUT left_tokens bigint
) LANGUAGE plpgsql AS $$
DECLARE
    r record;
    room bigint;
BEGIN
    INSERT INTO completions_budgetmonth (account, user_id, month, used, reserved)
    SELECT a, p_user, p_month, 0, 0 FROM unnest(p_accounts) AS a
    ON CONFLICT (account, month) DO NOTHING;
    left_tokens := NULL;
    FOR r IN
        SELECT b.account, b.used, b.reserved FROM completions_budgetmonth b
        WHERE b.account = ANY(p_accounts) AND b.month = p_month
        ORDER BY b.account
        FOR UPDATE
    LOOP
        room := p_budgets[array_position(p_accounts, r.account)] - r.used - r.reserved;
        IF left_tokens IS NULL OR room < left_tokens THEN
            left_tokens := room;
        END IF;
    END LOOP;
    left_tokens := GREATEST(0, COALESCE(left_tokens, 0));
    fit := LEAST(p_max_tokens, GREATEST(0, (left_tokens - p_prompt) / GREATEST(1, p_choices)));
    IF (fit >= p_max_tokens OR (p_clamp AND fit >= 1))
        AND left_tokens >= p_prompt + GREATEST(1, p_choices) * fit THEN
        UPDATE completions_budgetmonth
        SET reserved = reserved + p_prompt + GREATEST(1, p_choices) * fit
        WHERE account = ANY(p_accounts) AND month = p_month;
    END IF;
END
$$;
"""
DROP_RESERVE_FUNCTION = (
    "DROP FUNCTION IF EXISTS weft_reserve(text[], bigint[], bigint, date, bigint, integer, "
    "bigint, boolean)"
)
