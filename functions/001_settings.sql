-- Settings: the constants of design.md section 5, read through one function each way.

CREATE OR REPLACE FUNCTION ember.setting(p_key text)
RETURNS jsonb
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v jsonb;
BEGIN
    SELECT s.value INTO v FROM ember.settings AS s WHERE s.key = p_key;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown setting "%"', p_key
            USING ERRCODE = 'EM014', HINT = 'see SELECT key FROM ember.settings';
    END IF;
    RETURN v;
END;
$$;

CREATE OR REPLACE FUNCTION ember.setting_interval(p_key text)
RETURNS interval
LANGUAGE sql STABLE
AS $$ SELECT (ember.setting(p_key) #>> '{}')::interval $$;

CREATE OR REPLACE FUNCTION ember.setting_int(p_key text)
RETURNS integer
LANGUAGE sql STABLE
AS $$ SELECT (ember.setting(p_key) #>> '{}')::integer $$;

-- Time is a parameter (design.md invariant 10): every time-dependent function takes p_now and
-- passes it here first. A NULL "now" is a caller's bug: left alone it would surface as a raw
-- not-null violation on some column, or worse pass silently (every comparison with NULL is
-- unknown, so tick() would drop every prefix as expired). Refused by name instead.
CREATE OR REPLACE FUNCTION ember.require_now(p_now timestamptz)
RETURNS timestamptz
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF p_now IS NULL THEN
        RAISE EXCEPTION 'the time ("p_now") must not be null'
            USING ERRCODE = 'EM012', HINT = 'omit it for clock_timestamp(), or pass a time';
    END IF;
    RETURN p_now;
END;
$$;
