-- Times a worker reports, and the clock leases are judged on, for every pipeline that leases a
-- run (shadow, consolidation): one rule, so no pipeline trusts a time another would refuse.

-- Why a reported time (an outcome's finished_at) is not one to record, or NULL when it is absent
-- or fine. Digits first: refuses the special inputs 'now', 'today', 'infinity', whose meaning
-- depends on when the text is read rather than on what the worker observed; then any data
-- exception of the cast (a bad field, an unknown time zone, an offset out of range); then the
-- range Ember accepts for any time (ember.time_accepted).
CREATE OR REPLACE FUNCTION ember.reported_time_error(p_field text, p_value jsonb)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_time timestamptz;
BEGIN
    IF p_value IS NULL OR jsonb_typeof(p_value) = 'null' THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(p_value) <> 'string' OR p_value #>> '{}' !~ '^\d{4}-' THEN
        RETURN format('%s must be a timestamp string, got %s', p_field, left(p_value::text, 80));
    END IF;
    BEGIN
        v_time := (p_value #>> '{}')::timestamptz;
    EXCEPTION WHEN data_exception THEN
        RETURN format('%s is not a timestamp: %s', p_field, left(p_value::text, 80));
    END;
    IF NOT ember.time_accepted(v_time) THEN
        RETURN format('%s %s is outside the times Ember accepts (1970 up to the end of 2199)', p_field, v_time);
    END IF;
    RETURN NULL;
END;
$$;

-- The time a leased run's lease is judged at, and the time its outcome is recorded at, from when
-- it started (the claim's "now"), the database's clock at the claim and the finished_at its
-- worker reported (already checked by reported_time_error).
--
-- A run claimed on the database's clock (started within a second of claimed_clock) is judged on
-- the clock now: the lease holds if the submit arrives before it expires, whatever finished_at
-- says, so a back-dated finished_at cannot pass a lapsed lease; finished_at is only recorded, kept
-- between the start and the clock, so a worker whose clock runs fast or slow is neither refused
-- on time nor able to write the future or the distant past. A run claimed with a simulated
-- "now" (p_now in tests, ember eval) is judged on its finished_at, else the clock, as simulated
-- time must replay.
CREATE OR REPLACE FUNCTION ember.lease_times(
    p_started timestamptz, p_claimed_clock timestamptz, p_finished timestamptz,
    OUT lease_now timestamptz, OUT recorded_at timestamptz
)
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    IF abs(extract(EPOCH FROM p_started - p_claimed_clock)) < 1 THEN
        lease_now := clock_timestamp();
        recorded_at := greatest(least(coalesce(p_finished, lease_now), lease_now), p_started);
    ELSE
        lease_now := coalesce(p_finished, clock_timestamp());
        recorded_at := lease_now;
    END IF;
END;
$$;
