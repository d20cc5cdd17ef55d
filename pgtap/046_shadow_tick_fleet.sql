BEGIN;
SELECT plan(9);

-- fleet_tick(): about one tick an interval across workers, and nothing held between calls, so a
-- worker that stops ticking (dead or frozen with its connection open) is replaced at the next
-- worker's next call. clock_timestamp() moves inside this transaction; pg_sleep moves it on.

SELECT isnt(ember.fleet_tick('a', interval '1 hour'), NULL, 'the first call ticks');
SELECT is((SELECT worker FROM ember.fleet_tick), 'a', 'and records who ticked');
SELECT is(ember.fleet_tick('b', interval '1 hour'), NULL,
    'another worker within half an interval leaves the tick alone');
SELECT is(ember.fleet_tick('a', interval '1 hour'), NULL, 'and so does the ticker itself');

SELECT pg_sleep(0.02);
SELECT is(ember.fleet_tick('b', interval '20 ms') ->> 'ticker_before', 'a',
    'once half an interval has passed with no tick, the next caller ticks and says whom it replaced');
SELECT is((SELECT worker FROM ember.fleet_tick), 'b', 'and is the ticker now');

-- A last tick recorded in the future (a clock set back, a row written by hand) holds nobody off.
UPDATE ember.fleet_tick SET ticked_at = clock_timestamp() + interval '1 day';
SELECT isnt(ember.fleet_tick('c', interval '1 hour'), NULL, 'a last tick in the future holds nobody off');

SELECT throws_ok($$SELECT ember.fleet_tick('', interval '1 minute')$$, '22023', NULL,
    'a worker must name itself');
SELECT throws_ok($$SELECT ember.fleet_tick('a', interval '-1 second')$$, '22023', NULL,
    'and give an interval above zero');

SELECT * FROM finish();
ROLLBACK;
