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
