-- tidegate's fence at the database (docs/src/partitions.md, "The fence at the database").
--
-- The last line of defence of seed 000: a write whose user's unit the writing zone does not own
-- is refused by the database itself, so a writer that ignores the write contract, or a zone cut
-- off from the coordinators but not from the database, cannot commit for a user another zone
-- owns. `tidegate fence postgres` keeps tidegate.owners and tidegate.pins current (a subscriber
-- like any other, counted by every barrier: it acknowledges a routing version only once this
-- database holds it); `tidegate fence sql --table T --user-column C` prints this file and the
-- trigger for table T.
--
-- A writing session names its zone once: SET tidegate.zone = 'az-a' (or per transaction with
-- SET LOCAL). A session that names none is refused (fail closed).
--
-- The unit of a user is XXH3-64 (seed 0) of the UTF-8 bytes of the user ID, modulo the unit
-- count (tidegate_core::unit). It is computed here, in SQL, so that the database does not take
-- the writer's word for it; tidegate.unit_hash is checked against the same golden vectors as
-- every client (tests/fixtures/unit_hash_vectors.json).

CREATE SCHEMA IF NOT EXISTS tidegate;

-- One row per unit of each routing domain: its owner zone, whether a move in progress froze
-- it, and the routing version the row was written at.
CREATE TABLE IF NOT EXISTS tidegate.owners (
    domain  text    NOT NULL,
    unit    integer NOT NULL,
    zone    text    NOT NULL,
    frozen  boolean NOT NULL,
    version bigint  NOT NULL,
    PRIMARY KEY (domain, unit)
);

-- Pinned users (pin > map): their owner whatever their unit.
CREATE TABLE IF NOT EXISTS tidegate.pins (
    user_id text   PRIMARY KEY,
    zone    text   NOT NULL,
    version bigint NOT NULL
);

-- The table the rows above describe: its version and unit count (one row).
CREATE TABLE IF NOT EXISTS tidegate.routing (
    id      boolean PRIMARY KEY DEFAULT true CHECK (id),
    version bigint  NOT NULL,
    units   integer NOT NULL,
    log_id  text
);

-- Unsigned 64-bit arithmetic on bigint (two's complement), through numeric.
CREATE OR REPLACE FUNCTION tidegate.u64(n numeric) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT CASE WHEN m >= 9223372036854775808 THEN (m - 18446744073709551616)::bigint ELSE m::bigint END
    FROM (SELECT mod(n, 18446744073709551616) AS m) AS x
$$;

CREATE OR REPLACE FUNCTION tidegate.n64(b bigint) RETURNS numeric
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT CASE WHEN b < 0 THEN b::numeric + 18446744073709551616 ELSE b::numeric END
$$;

CREATE OR REPLACE FUNCTION tidegate.shr(b bigint, n integer) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ SELECT (b::bit(64) >> n)::bigint $$;

CREATE OR REPLACE FUNCTION tidegate.shl(b bigint, n integer) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ SELECT (b::bit(64) << n)::bigint $$;

CREATE OR REPLACE FUNCTION tidegate.mul(a bigint, b bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ SELECT tidegate.u64(tidegate.n64(a) * tidegate.n64(b)) $$;

CREATE OR REPLACE FUNCTION tidegate.add(a bigint, b bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ SELECT tidegate.u64(tidegate.n64(a) + tidegate.n64(b)) $$;

-- The low and high halves of the 128-bit product, XORed.
CREATE OR REPLACE FUNCTION tidegate.mul128_fold64(a bigint, b bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT tidegate.u64(mod(p, 18446744073709551616)) # tidegate.u64(div(p, 18446744073709551616))
    FROM (SELECT tidegate.n64(a) * tidegate.n64(b) AS p) AS x
$$;

CREATE OR REPLACE FUNCTION tidegate.read64(bytes bytea, at integer) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT tidegate.u64(
        get_byte(bytes, at)::numeric
        + get_byte(bytes, at + 1)::numeric * 256
        + get_byte(bytes, at + 2)::numeric * 65536
        + get_byte(bytes, at + 3)::numeric * 16777216
        + get_byte(bytes, at + 4)::numeric * 4294967296
        + get_byte(bytes, at + 5)::numeric * 1099511627776
        + get_byte(bytes, at + 6)::numeric * 281474976710656
        + get_byte(bytes, at + 7)::numeric * 72057594037927936)
$$;

CREATE OR REPLACE FUNCTION tidegate.read32(bytes bytea, at integer) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    -- Parenthesised: PostgreSQL gives `|` and `<<` the same precedence, left to right.
    SELECT get_byte(bytes, at)::bigint | (get_byte(bytes, at + 1)::bigint << 8)
         | (get_byte(bytes, at + 2)::bigint << 16) | (get_byte(bytes, at + 3)::bigint << 24)
$$;

CREATE OR REPLACE FUNCTION tidegate.secret() RETURNS bytea
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT '\xb8fe6c3923a44bbe7c01812cf721ad1cded46de9839097db7240a4a4b7b3671fcb79e64eccc0e578825ad07dccff7221b8084674f743248ee03590e6813a264c3c2852bb91c300cb88d0658b1b532ea371644897a20df94e3819ef46a9deacd8a8fa763fe39c343ff9dcbbc7c70b4f1d8a51e04bcdb45931c89f7ec9d9787364eac5ac8334d3ebc3c581a0fffa1363eb170ddd51b7f0da49d316552629d4689e2b16be587d47a1fc8ff8b8d17ad031ce45cb3a8f95160428afd7fbcabb4b407e'::bytea $$;

CREATE OR REPLACE FUNCTION tidegate.avalanche(v bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT w # tidegate.shr(w, 32)
    FROM (SELECT tidegate.mul(v # tidegate.shr(v, 37), 1609587791953885689) AS w) AS x -- 0x165667919E3779F9
$$;

-- XXH64's avalanche (the 1-3 byte path and the empty input).
CREATE OR REPLACE FUNCTION tidegate.avalanche64(v bigint) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
BEGIN
    v := v # tidegate.shr(v, 33);
    v := tidegate.mul(v, -4417276706812531889);  -- 0xC2B2AE3D27D4EB4F
    v := v # tidegate.shr(v, 29);
    v := tidegate.mul(v, 1609587929392839161);   -- 0x165667B19E3779F9
    RETURN v # tidegate.shr(v, 32);
END $$;

CREATE OR REPLACE FUNCTION tidegate.mix16(bytes bytea, at integer, s integer) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT tidegate.mul128_fold64(
        tidegate.read64(bytes, at) # tidegate.read64(tidegate.secret(), s),
        tidegate.read64(bytes, at + 8) # tidegate.read64(tidegate.secret(), s + 8))
$$;

-- XXH3-64 with seed 0 of `bytes` (at most 256 bytes: a user ID's limit).
CREATE OR REPLACE FUNCTION tidegate.xxh3_64(bytes bytea) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    len integer := length(bytes);
    sec bytea := tidegate.secret();
    acc bigint;
    lo bigint;
    hi bigint;
    i integer;
    a bigint[];
    stripes integer;
    d bigint;
    k bigint;
BEGIN
    IF len = 0 THEN
        RETURN tidegate.avalanche64(tidegate.read64(sec, 56) # tidegate.read64(sec, 64));
    ELSIF len <= 3 THEN
        acc := (get_byte(bytes, 0)::bigint << 16) | (get_byte(bytes, len >> 1)::bigint << 24)
             | get_byte(bytes, len - 1)::bigint | (len::bigint << 8);
        RETURN tidegate.avalanche64(acc # (tidegate.read32(sec, 0) # tidegate.read32(sec, 4)));
    ELSIF len <= 8 THEN
        acc := tidegate.add(tidegate.read32(bytes, len - 4), tidegate.shl(tidegate.read32(bytes, 0), 32))
             # (tidegate.read64(sec, 8) # tidegate.read64(sec, 16));
        -- strong avalanche
        acc := acc # (tidegate.shl(acc, 49) | tidegate.shr(acc, 15)) # (tidegate.shl(acc, 24) | tidegate.shr(acc, 40));
        acc := tidegate.mul(acc, -6939452855193903323);  -- 0x9FB21C651E98DF25
        acc := acc # tidegate.add(tidegate.shr(acc, 35), len);
        acc := tidegate.mul(acc, -6939452855193903323);
        RETURN acc # tidegate.shr(acc, 28);
    ELSIF len <= 16 THEN
        lo := tidegate.read64(bytes, 0) # (tidegate.read64(sec, 24) # tidegate.read64(sec, 32));
        hi := tidegate.read64(bytes, len - 8) # (tidegate.read64(sec, 40) # tidegate.read64(sec, 48));
        acc := tidegate.add(tidegate.add(tidegate.add(len,
                   tidegate.read64(int8send(lo), 0)),  -- swap_bytes: int8send is big-endian
                   hi), tidegate.mul128_fold64(lo, hi));
        RETURN tidegate.avalanche(acc);
    ELSIF len <= 128 THEN
        acc := tidegate.mul(len, -7046029288634856825);  -- 0x9E3779B185EBCA87
        IF len > 32 THEN
            IF len > 64 THEN
                IF len > 96 THEN
                    acc := tidegate.add(acc, tidegate.mix16(bytes, 48, 96));
                    acc := tidegate.add(acc, tidegate.mix16(bytes, len - 64, 112));
                END IF;
                acc := tidegate.add(acc, tidegate.mix16(bytes, 32, 64));
                acc := tidegate.add(acc, tidegate.mix16(bytes, len - 48, 80));
            END IF;
            acc := tidegate.add(acc, tidegate.mix16(bytes, 16, 32));
            acc := tidegate.add(acc, tidegate.mix16(bytes, len - 32, 48));
        END IF;
        acc := tidegate.add(acc, tidegate.mix16(bytes, 0, 0));
        acc := tidegate.add(acc, tidegate.mix16(bytes, len - 16, 16));
        RETURN tidegate.avalanche(acc);
    ELSIF len <= 240 THEN
        acc := tidegate.mul(len, -7046029288634856825);
        FOR i IN 0..7 LOOP
            acc := tidegate.add(acc, tidegate.mix16(bytes, 16 * i, 16 * i));
        END LOOP;
        acc := tidegate.avalanche(acc);
        FOR i IN 8..(len / 16 - 1) LOOP
            acc := tidegate.add(acc, tidegate.mix16(bytes, 16 * i, 16 * (i - 8) + 3));
        END LOOP;
        acc := tidegate.add(acc, tidegate.mix16(bytes, len - 16, 136 - 17));
        RETURN tidegate.avalanche(acc);
    END IF;
    -- Longer: the stripe loop of XXH3's long hash (one block of 16 stripes covers 1 024 bytes,
    -- more than a user ID, so no scramble is ever needed below 1 025 bytes).
    IF len > 1024 THEN
        RAISE EXCEPTION 'tidegate.xxh3_64: % bytes; user IDs are at most 256', len;
    END IF;
    a := ARRAY[3266489917, -7046029288634856825, -4417276706812531889, 1609587929392839161,
               -8796714831421723037, 2246822519, 2870177450012600261, 2654435761]::bigint[];
    stripes := (len - 1) / 64;
    FOR s IN 0..stripes LOOP
        FOR i IN 0..7 LOOP
            IF s < stripes THEN
                d := tidegate.read64(bytes, 64 * s + 8 * i);
                k := d # tidegate.read64(sec, 8 * s + 8 * i);
            ELSE
                d := tidegate.read64(bytes, len - 64 + 8 * i);
                k := d # tidegate.read64(sec, 192 - 64 - 7 + 8 * i);
            END IF;
            a[(i # 1) + 1] := tidegate.add(a[(i # 1) + 1], d);
            a[i + 1] := tidegate.add(a[i + 1],
                tidegate.u64((k & 4294967295)::numeric * tidegate.shr(k, 32)::numeric));
        END LOOP;
    END LOOP;
    acc := tidegate.mul(len, -7046029288634856825);
    FOR i IN 0..3 LOOP
        acc := tidegate.add(acc, tidegate.mul128_fold64(
            a[2 * i + 1] # tidegate.read64(sec, 11 + 16 * i),
            a[2 * i + 2] # tidegate.read64(sec, 11 + 16 * i + 8)));
    END LOOP;
    RETURN tidegate.avalanche(acc);
END $$;

-- The unit of a user ID under `units` units: the hash, unsigned, modulo the count.
CREATE OR REPLACE FUNCTION tidegate.unit_of(user_id text, units integer) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT mod(tidegate.n64(tidegate.xxh3_64(convert_to(user_id, 'UTF8'))), units)::integer
$$;

-- Refuses the write of `user_id` by this session's zone unless that zone owns the user and the
-- user's unit is not frozen. The owner's row is read FOR SHARE and kept until the writing
-- transaction ends, so `tidegate fence postgres` cannot record a freeze or a switch of that unit
-- while a write judged by the old owner is still uncommitted (its update waits for the write);
-- and it acknowledges the routing version only after its update committed. That is what makes
-- "every live subscriber applied the freeze" also mean "no write by the old owner is in flight
-- in this database".
CREATE OR REPLACE FUNCTION tidegate.check_owner(user_id text, domain text DEFAULT 'default')
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    writer text := nullif(current_setting('tidegate.zone', true), '');
    n_units integer;
    at_version bigint;
    owner text;
    is_frozen boolean := false;
    user_unit integer;
BEGIN
    IF writer IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'TG001',
            MESSAGE = 'tidegate fence: this session named no zone',
            HINT = 'SET tidegate.zone = ''<the writing zone>'' before writing (or SET LOCAL in the transaction)';
    END IF;
    SELECT r.units, r.version INTO n_units, at_version FROM tidegate.routing r;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'TG001',
            MESSAGE = 'tidegate fence: no routing table yet',
            HINT = 'run `tidegate fence postgres` against this database';
    END IF;
    SELECT p.zone INTO owner FROM tidegate.pins p WHERE p.user_id = check_owner.user_id FOR SHARE;
    IF NOT FOUND THEN
        user_unit := tidegate.unit_of(user_id, n_units);
        SELECT o.zone, o.frozen INTO owner, is_frozen FROM tidegate.owners o
            WHERE o.domain = check_owner.domain AND o.unit = user_unit FOR SHARE;
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'TG001',
                MESSAGE = format('tidegate fence: domain %s has no owner for unit %s', domain, user_unit);
        END IF;
    END IF;
    IF is_frozen THEN
        RAISE EXCEPTION USING ERRCODE = 'TG002',
            MESSAGE = format('tidegate fence: user %s (unit %s) is frozen by a move in progress (routing version %s)', user_id, user_unit, at_version),
            HINT = 'retry shortly: the move switches and unfreezes within its window';
    END IF;
    IF owner IS DISTINCT FROM writer THEN
        RAISE EXCEPTION USING ERRCODE = 'TG003',
            MESSAGE = format('tidegate fence: user %s belongs to %s, not to %s (routing version %s)', user_id, owner, writer, at_version),
            HINT = 'forward the write to the owner zone';
    END IF;
END $$;

-- The row trigger: TG_ARGV[0] names the user ID column (and TG_ARGV[1], optionally, the
-- routing domain). An UPDATE that changes the user must be owned for both users.
CREATE OR REPLACE FUNCTION tidegate.fence() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    col text := TG_ARGV[0];
    domain text := coalesce(TG_ARGV[1], 'default');
    old_user text;
    new_user text;
BEGIN
    IF TG_OP <> 'INSERT' THEN
        old_user := to_jsonb(OLD) ->> col;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        new_user := to_jsonb(NEW) ->> col;
    END IF;
    IF coalesce(new_user, old_user) IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'TG001',
            MESSAGE = format('tidegate fence: column %s of %s holds no user ID', col, TG_TABLE_NAME);
    END IF;
    IF old_user IS NOT NULL THEN
        PERFORM tidegate.check_owner(old_user, domain);
    END IF;
    IF new_user IS NOT NULL AND new_user IS DISTINCT FROM old_user THEN
        PERFORM tidegate.check_owner(new_user, domain);
    END IF;
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    RETURN NEW;
END $$;
