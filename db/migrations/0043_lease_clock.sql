-- When a shadow run was claimed by the database's own clock, whatever "now" the claim was given:
-- submit_shadow_run judges the lease on the time that has really passed since (together with the
-- outcome's finished_at), so a back-dated finished_at cannot pass a lapsed lease and a worker
-- whose clock runs fast is not refused on time. Filled by its default, so no claim changes.
ALTER TABLE ember.shadow_runs ADD COLUMN claimed_clock timestamptz NOT NULL DEFAULT clock_timestamp();
