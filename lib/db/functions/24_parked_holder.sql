-- kiln_parked_holder: the holder of a parked node's row (25_park.sql): no
-- worker's id (the nil uuid).
CREATE OR REPLACE FUNCTION kiln_parked_holder() RETURNS uuid LANGUAGE sql IMMUTABLE AS $$
  SELECT '00000000-0000-0000-0000-000000000000'::uuid
$$;
