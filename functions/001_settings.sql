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
-- The times Ember accepts from a caller or a file: finite, from 1970 up to the end of 2199. A
-- time is recorded on the row it describes and ordered against later ones: an `infinity` would
-- refuse every later write to its thread as "time running backwards", a `-infinity` would sort
-- before everything and break every reader that subtracts times. The bounds are wide enough for
-- any history and any injected clock, and narrow enough that arithmetic on them never overflows.
CREATE OR REPLACE FUNCTION ember.time_accepted(p_at timestamptz)
RETURNS boolean
LANGUAGE sql IMMUTABLE
AS $$
    SELECT p_at >= '1970-01-01 00:00:00+00'::timestamptz AND p_at < '2200-01-01 00:00:00+00'::timestamptz
$$;

CREATE OR REPLACE FUNCTION ember.require_now(p_now timestamptz)
RETURNS timestamptz
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF p_now IS NULL THEN
        RAISE EXCEPTION 'the time ("p_now") must not be null'
            USING ERRCODE = 'EM012', HINT = 'omit it for clock_timestamp(), or pass a time';
    END IF;
    IF NOT ember.time_accepted(p_now) THEN
        RAISE EXCEPTION 'the time ("p_now") % is outside the times Ember accepts', p_now
            USING ERRCODE = 'EM012', HINT = 'a finite time from 1970 up to the end of 2199';
    END IF;
    RETURN p_now;
END;
$$;

-- A setting's value checked against its declared type and range (db/migrations/0031): the value
-- as Ember stores it (a JSON string for interval and text, a JSON number otherwise), or a refusal
-- (EM092) that names the setting, the value and what it may be. p_text is the value as an
-- operator types it ('5 minutes', '3', '0.9'); a JSON string ('"5 minutes"') is taken as its
-- content. A setting without a declared type keeps the JSON type its current value has.
CREATE OR REPLACE FUNCTION ember.checked_setting_value(s ember.settings, p_text text)
RETURNS jsonb
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_text text := btrim(p_text);
    v_type text;
    v_interval interval;
    v_number numeric;
    v_range text := concat_ws(' ', 'from ' || s.min_value, 'to ' || s.max_value);
BEGIN
    IF v_text IS NULL OR v_text = '' THEN
        RAISE EXCEPTION 'setting "%": a value is required', s.key USING ERRCODE = 'EM092';
    END IF;
    IF v_text ~ '^".*"$' THEN
        BEGIN
            v_text := btrim(v_text::jsonb #>> '{}');
        EXCEPTION WHEN invalid_text_representation THEN
            NULL;  -- not a JSON string after all: taken as typed
        END;
    END IF;
    v_type := coalesce(s.value_type, CASE jsonb_typeof(s.value) WHEN 'number' THEN 'number' ELSE 'text' END);
    IF v_type = 'interval' THEN
        BEGIN
            v_interval := v_text::interval;
        EXCEPTION WHEN invalid_datetime_format OR datetime_field_overflow OR interval_field_overflow THEN
            RAISE EXCEPTION 'setting "%": "%" is not an interval', s.key, v_text
                USING ERRCODE = 'EM092',
                      HINT = 'e.g. ''20 minutes'' or ''6 hours''; ' || coalesce(nullif(v_range, ''), 'any length');
        END;
        IF v_interval < s.min_value::interval OR v_interval > s.max_value::interval THEN
            RAISE EXCEPTION 'setting "%": "%" is out of range (%)', s.key, v_text, v_range
                USING ERRCODE = 'EM092';
        END IF;
        RETURN to_jsonb(v_text);
    END IF;
    IF v_type IN ('integer', 'number') THEN
        IF v_text !~ (CASE v_type WHEN 'integer' THEN '^-?[0-9]+$' ELSE '^-?([0-9]+[.]?[0-9]*|[.][0-9]+)$' END) THEN
            RAISE EXCEPTION 'setting "%": "%" is not %', s.key, v_text,
                CASE v_type WHEN 'integer' THEN 'a whole number' ELSE 'a number' END
                USING ERRCODE = 'EM092', HINT = coalesce(nullif(v_range, ''), 'any number');
        END IF;
        v_number := v_text::numeric;
        IF v_number < s.min_value::numeric OR v_number > s.max_value::numeric THEN
            RAISE EXCEPTION 'setting "%": % is out of range (%)', s.key, v_text, v_range
                USING ERRCODE = 'EM092';
        END IF;
        RETURN to_jsonb(v_number);
    END IF;
    RETURN to_jsonb(v_text);
END;
$$;

-- Change a setting: the operator's way in (`ember settings KEY VALUE` calls it). Returns what
-- changed: {key, previous, value, default}.
CREATE OR REPLACE FUNCTION ember.set_setting(p_key text, p_value text)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    s ember.settings;
    v_new jsonb;
BEGIN
    SELECT * INTO s FROM ember.settings WHERE key = p_key FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown setting "%"', p_key
            USING ERRCODE = 'EM014', HINT = 'ember settings (or SELECT * FROM ember.settings_list()) lists them';
    END IF;
    v_new := ember.checked_setting_value(s, p_value);
    UPDATE ember.settings SET value = v_new WHERE key = p_key;
    RETURN jsonb_build_object('key', p_key, 'previous', s.value, 'value', v_new, 'default', s.default_value);
END;
$$;

-- Every setting with its value, default, type, range and meaning, in key order.
CREATE OR REPLACE FUNCTION ember.settings_list()
RETURNS TABLE (
    key text, value jsonb, default_value jsonb, value_type text, min_value text, max_value text,
    description text
)
LANGUAGE sql STABLE
AS $$
    SELECT s.key, s.value, s.default_value, s.value_type, s.min_value, s.max_value, s.description
    FROM ember.settings AS s
    ORDER BY s.key
$$;

-- The table holds its own rule: a direct UPDATE or INSERT is held to the same type and range as
-- set_setting, since a bad interval would otherwise surface later as a cast error inside tick().
-- A new row without a default takes its first value as the default.
CREATE OR REPLACE FUNCTION ember.settings_valid()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF tg_op = 'INSERT' THEN
        new.default_value := coalesce(new.default_value, new.value);
    END IF;
    IF new.value_type IS NOT NULL THEN
        IF (new.value_type IN ('interval', 'text')) <> (jsonb_typeof(new.value) = 'string')
           OR (new.value_type IN ('integer', 'number')) <> (jsonb_typeof(new.value) = 'number') THEN
            RAISE EXCEPTION 'setting "%": % is not a JSON % value', new.key, new.value,
                CASE WHEN new.value_type IN ('interval', 'text') THEN 'string' ELSE 'number' END
                USING ERRCODE = 'EM092', HINT = 'ember.set_setting(key, value) takes the value as text';
        END IF;
        PERFORM ember.checked_setting_value(new, new.value #>> '{}');
    END IF;
    RETURN new;
END;
$$;

CREATE OR REPLACE TRIGGER settings_valid
BEFORE INSERT OR UPDATE ON ember.settings
FOR EACH ROW EXECUTE FUNCTION ember.settings_valid();
