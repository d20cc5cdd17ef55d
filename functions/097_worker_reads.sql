-- What the worker reads outside its claim plans, each through a function granted to
-- ember_worker (999_grants.sql): the role holds no table privileges, so a direct read of
-- ember.models from the worker fails with InsufficientPrivilege under the role
-- docs/operations.md prescribes. Putting the value in the claim plan would spare a round trip,
-- but the worker caches it per model for its lifetime, so one call per model is enough.

-- The model's thinking retention ('all' or 'last-turn'), which decides how a hot request is
-- rebuilt; NULL for a model the registry does not know (the worker then assumes 'all').
CREATE OR REPLACE FUNCTION ember.model_thinking_retention(p_model text)
RETURNS text
LANGUAGE sql
STABLE
SET search_path = pg_catalog, ember, pg_temp
AS $$
    SELECT m.thinking_retention FROM ember.models AS m WHERE m.id = p_model
$$;
