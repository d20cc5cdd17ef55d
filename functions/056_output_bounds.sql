-- Bounds on what one model answer may make the database do (settings in
-- db/migrations/0042_output_bounds.sql). Over a bound the answer is told so (an error tool
-- result) or the proposal is kept rejected with the reason; a step or a submit never fails for
-- it. Cutting silently was the alternative: the model would never learn its call was not applied.

-- p_text cut to p_chars characters, with a marker saying how much was left out.
CREATE OR REPLACE FUNCTION ember.shorten_text(p_text text, p_chars integer)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT CASE WHEN length(p_text) <= p_chars THEN p_text
        ELSE left(p_text, p_chars) || format('… [%s more characters]', length(p_text) - p_chars)
    END
$$;

-- A steward tool's text argument longer than the setting p_setting: the call's error (EM066).
CREATE OR REPLACE FUNCTION ember.steward_bounded_arg(p_value text, p_name text, p_setting text)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    v_max integer := ember.setting_int(p_setting);
BEGIN
    IF length(p_value) > v_max THEN
        PERFORM ember.steward_tool_error(format(
            '%s is %s characters; at most %s are taken (setting %s): say it shorter',
            p_name, length(p_value), v_max, p_setting));
    END IF;
END;
$$;

-- A shadow proposal over a bound is kept, rejected with the reason, whatever the submit judged
-- of it: past shadow_max_proposals in its run (by ordinal), or with a text longer than
-- max_fact_chars, which is stored shortened so the comparison still shows what it said. A
-- trigger rather than a check in submit_shadow_run, so every writer of shadow_proposals gets it.
CREATE OR REPLACE FUNCTION ember.shadow_proposal_bounds()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    v_max_count integer := ember.setting_int('shadow_max_proposals');
    v_max_chars integer := ember.setting_int('max_fact_chars');
BEGIN
    IF NEW.ordinal > v_max_count THEN
        NEW.validation_error := coalesce(NEW.validation_error, format(
            'over the limit of %s proposals per run (setting shadow_max_proposals)', v_max_count));
    END IF;
    IF length(NEW.text) > v_max_chars THEN
        NEW.validation_error := coalesce(NEW.validation_error, format(
            'text is %s characters; a proposal holds at most %s (setting max_fact_chars)',
            length(NEW.text), v_max_chars));
        NEW.text := ember.shorten_text(NEW.text, v_max_chars);
    END IF;
    RETURN NEW;
END;
$$;

-- Named to fire before shadow_proposals' other BEFORE triggers (they fire in name order): the
-- text is cut before it is cleaned, and the guard that refuses a valid-marked row pointing
-- elsewhere sees the final validation_error.
CREATE OR REPLACE TRIGGER a_shadow_proposal_bounds
BEFORE INSERT ON ember.shadow_proposals
FOR EACH ROW EXECUTE FUNCTION ember.shadow_proposal_bounds();
