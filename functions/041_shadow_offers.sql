-- The claim's view of the standing offers (db/migrations/0044_shadow_offers.sql), kept by
-- triggers in the transaction that changes what it depends on.
--
-- shadow_offers has a row for a thread exactly when the thread has a standing (not deferred)
-- signal, with the earliest one's time. The signals are few per thread and every writer of them
-- holds the thread's row lock, so a row trigger that recomputes the thread's figure from its own
-- signals (by index) is both cheap and exact.
--
-- A new offer takes its claim round (db/migrations/0052_fair_shadow_claims.sql): the round after
-- its tenant's last standing offer, and never one before the current round (the lowest round of
-- the offers not parked), so a tenant that had nothing waiting joins the round being served
-- instead of going ahead of everyone who waited. Two offers of one tenant written at once may
-- share a round; the claim then takes the earlier signal first. An offer keeps its round while it
-- stands.
CREATE OR REPLACE FUNCTION ember.shadow_offer_refresh(p_tenant text, p_thread text)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    v_at timestamptz;
BEGIN
    SELECT min(s.created_at) INTO v_at
    FROM ember.shadow_signals AS s
    WHERE s.tenant_id = p_tenant AND s.thread_id = p_thread AND NOT s.deferred;
    IF v_at IS NULL THEN
        DELETE FROM ember.shadow_offers WHERE tenant_id = p_tenant AND thread_id = p_thread;
    ELSE
        -- The round is read for a standing offer too (two index probes) and then left alone.
        INSERT INTO ember.shadow_offers AS o (tenant_id, thread_id, signalled_at, claim_round)
        VALUES (p_tenant, p_thread, v_at, greatest(
            (SELECT max(x.claim_round) + 1 FROM ember.shadow_offers AS x WHERE x.tenant_id = p_tenant),
            (SELECT min(x.claim_round) FROM ember.shadow_offers AS x WHERE x.parked_reason IS NULL),
            1
        ))
        ON CONFLICT (tenant_id, thread_id) DO UPDATE SET signalled_at = excluded.signalled_at
        WHERE o.signalled_at IS DISTINCT FROM excluded.signalled_at;
    END IF;
END;
$$;

CREATE OR REPLACE FUNCTION ember.shadow_signals_note_offer()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF tg_op IN ('UPDATE', 'DELETE') THEN
        PERFORM ember.shadow_offer_refresh(old.tenant_id, old.thread_id);
    END IF;
    IF tg_op IN ('INSERT', 'UPDATE') AND (
        tg_op = 'INSERT' OR (new.tenant_id, new.thread_id) IS DISTINCT FROM (old.tenant_id, old.thread_id)
    ) THEN
        PERFORM ember.shadow_offer_refresh(new.tenant_id, new.thread_id);
    END IF;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE TRIGGER shadow_signals_note_offer
AFTER INSERT OR UPDATE OR DELETE ON ember.shadow_signals
FOR EACH ROW EXECUTE FUNCTION ember.shadow_signals_note_offer();

-- A park (parked_until / parked_reason) records that the last claim to look found the thread not
-- claimable (shadow_thread_readiness's not_ready, or no model). Each trigger below clears the
-- parks that what it changed could have made wrong; clearing is always safe, a stale park is not.
CREATE OR REPLACE FUNCTION ember.shadow_offer_unpark(p_tenant text, p_thread text)
RETURNS void
LANGUAGE sql
AS $$
    UPDATE ember.shadow_offers SET parked_until = NULL, parked_reason = NULL, parked_epoch = NULL
    WHERE tenant_id = p_tenant AND thread_id = p_thread AND parked_reason IS NOT NULL
$$;

-- Row changes of one thread's state: its runs (a run finishing, a failure counted), its turn state,
-- its generations (labels widened, a generation ended), its prefix (a hot path opened), its kind
-- or seal, and its progress (rows to read again, a failure counted, a read position moved).
CREATE OR REPLACE FUNCTION ember.shadow_offer_unpark_row()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF tg_table_name = 'threads' THEN
        PERFORM ember.shadow_offer_unpark(new.tenant_id, new.id);
    ELSE
        PERFORM ember.shadow_offer_unpark(new.tenant_id, new.thread_id);
    END IF;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE TRIGGER shadow_runs_unpark_offer
AFTER UPDATE OF status ON ember.shadow_runs
FOR EACH ROW WHEN (new.status IS DISTINCT FROM old.status)
EXECUTE FUNCTION ember.shadow_offer_unpark_row();

CREATE OR REPLACE TRIGGER shadow_thread_state_unpark_offer
AFTER UPDATE ON ember.shadow_thread_state
FOR EACH ROW WHEN (
    new.turn_running IS DISTINCT FROM old.turn_running OR new.waiting_user IS DISTINCT FROM old.waiting_user
)
EXECUTE FUNCTION ember.shadow_offer_unpark_row();

CREATE OR REPLACE TRIGGER generations_unpark_offer
AFTER UPDATE ON ember.generations
FOR EACH ROW WHEN (new.labels IS DISTINCT FROM old.labels OR new.ended_at IS DISTINCT FROM old.ended_at)
EXECUTE FUNCTION ember.shadow_offer_unpark_row();

CREATE OR REPLACE TRIGGER shadow_prefixes_unpark_offer
AFTER INSERT OR UPDATE ON ember.shadow_prefixes
FOR EACH ROW EXECUTE FUNCTION ember.shadow_offer_unpark_row();

CREATE OR REPLACE TRIGGER threads_unpark_offer
AFTER UPDATE ON ember.threads
FOR EACH ROW WHEN (new.kind IS DISTINCT FROM old.kind OR new.seal_tier IS DISTINCT FROM old.seal_tier)
EXECUTE FUNCTION ember.shadow_offer_unpark_row();

-- Only the transitions that can change readiness: unread rows appearing where none were, a read
-- position or failure count moving. A plain append to a generation already unread changes none
-- of them and pays nothing here.
CREATE OR REPLACE TRIGGER generation_progress_unpark_offer
AFTER UPDATE ON ember.generation_progress
FOR EACH ROW WHEN (
    new.unread AND NOT old.unread
    OR new.read_seq IS DISTINCT FROM old.read_seq
    OR new.failures IS DISTINCT FROM old.failures
)
EXECUTE FUNCTION ember.shadow_offer_unpark_row();

CREATE OR REPLACE TRIGGER generation_progress_unpark_offer_new
AFTER INSERT ON ember.generation_progress
FOR EACH ROW WHEN (new.unread)
EXECUTE FUNCTION ember.shadow_offer_unpark_row();

-- Registry and settings changes can move any thread's routing, hot-path rule or backoff: they
-- move the epoch, which makes every park taken before them stale (see the table's comment).
CREATE OR REPLACE FUNCTION ember.shadow_offer_unpark_all()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    UPDATE ember.shadow_park_epoch SET epoch = epoch + 1;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE TRIGGER models_unpark_offers
AFTER INSERT OR UPDATE OR DELETE ON ember.models
FOR EACH STATEMENT EXECUTE FUNCTION ember.shadow_offer_unpark_all();

CREATE OR REPLACE TRIGGER settings_unpark_offers
AFTER INSERT OR UPDATE OR DELETE ON ember.settings
FOR EACH STATEMENT EXECUTE FUNCTION ember.shadow_offer_unpark_all();
