BEGIN;
SELECT plan(10);

-- The distribution plan (functions/004_distribution_plan.sql) against the catalog: every table
-- of one person's data leads its keys with tenant_id, so a deployment can distribute Ember by
-- tenant with Citus after any change. Each failure lists what breaks the rule, naming the table
-- and the constraint, index, column or function; the rules are Citus's (docs/citus.md), each
-- described at ember.distribution_violations().

SELECT is_empty(
    'SELECT problem FROM ember.distribution_violations() WHERE rule = 1',
    'every table of schema ember is distributed, reference or local in the plan'
);
SELECT is_empty(
    'SELECT problem FROM ember.distribution_violations() WHERE rule = 2',
    'the plan names existing tables, once each, with a NOT NULL distribution column where distributed'
);
SELECT is_empty(
    'SELECT problem FROM ember.distribution_violations() WHERE rule = 3',
    'every primary and unique key of a distributed table leads with its distribution column'
);
SELECT is_empty(
    'SELECT problem FROM ember.distribution_violations() WHERE rule = 4',
    'foreign keys of distributed tables go to reference tables, or match tenant_id to tenant_id first'
);
SELECT is_empty(
    'SELECT problem FROM ember.distribution_violations() WHERE rule = 5',
    'no reference or local table has a foreign key into a distributed table'
);
SELECT is_empty(
    'SELECT problem FROM ember.distribution_violations() WHERE rule = 6',
    'every sequence-filled column of a distributed table is bigint'
);
SELECT is_empty(
    'SELECT problem FROM ember.distribution_violations() WHERE rule = 7',
    'every hot-path function of the plan exists, with the tenant argument it is routed by'
);
SELECT is_empty(
    'SELECT problem FROM ember.distribution_violations() WHERE rule = 8',
    'hot-path functions join distributed tables only on the distribution column'
);
SELECT is_empty(
    'SELECT problem FROM ember.distribution_violations() WHERE rule = 9',
    'every distributed table points to its tenant, directly or through keys that cannot be NULL'
);
SELECT cmp_ok(
    ember.distribution_hot_path_joins(), '>', 0::bigint,
    'the join check reads the hot path''s joins of distributed tables (it is not blind)'
);

SELECT * FROM finish();
ROLLBACK;
