-- Claims go round the tenants with work (issue 40): a tenant with 10,000 ready threads cannot
-- starve one with a single thread, and a tenant may be held to a number of runs in flight.
--
-- Each standing offer carries a claim round (functions/041_shadow_offers.sql): a tenant's first offer
-- joins the current round (the lowest round of any offer not parked), each further offer of the
-- same tenant the round after that tenant's last. The claim walks offers by round, then by signal
-- time: every tenant with work is served once a round, whatever the number of threads it has
-- waiting. This is start-time fair queueing with one claim as the unit of service, and it costs
-- the claim nothing: the walk stays one index scan that stops at the first claimable thread.
ALTER TABLE ember.shadow_offers ADD COLUMN claim_round bigint NOT NULL DEFAULT 1 CHECK (claim_round >= 1);

-- The offers standing now: each tenant's in signal order, one round each.
UPDATE ember.shadow_offers AS o SET claim_round = r.claim_round
FROM (
    SELECT
        s.tenant_id,
        s.thread_id,
        row_number() OVER (PARTITION BY s.tenant_id ORDER BY s.signalled_at, s.thread_id) AS claim_round
    FROM ember.shadow_offers AS s
) AS r
WHERE o.tenant_id = r.tenant_id AND o.thread_id = r.thread_id;

DROP INDEX ember.shadow_offers_order;
CREATE INDEX shadow_offers_order ON ember.shadow_offers (claim_round, signalled_at, tenant_id, thread_id);
-- A tenant's last round, for its next offer.
CREATE INDEX shadow_offers_tenant_round ON ember.shadow_offers (tenant_id, claim_round);
-- The current round: the lowest of the offers not parked.
CREATE INDEX shadow_offers_round ON ember.shadow_offers (claim_round) WHERE parked_reason IS NULL;

-- The per-tenant cap counts a tenant's running runs.
CREATE INDEX shadow_runs_tenant_running ON ember.shadow_runs (tenant_id) WHERE status = 'running';

INSERT INTO ember.settings (key, value, description, value_type, min_value, max_value, default_value)
VALUES (
    'tenant_max_running_runs', '0',
    'the most shadow runs one tenant may have in flight at once; a claim passes over a tenant at its '
    || 'cap and serves the next one. 0 is no cap',
    'integer', '0', '100000', '0'
);
