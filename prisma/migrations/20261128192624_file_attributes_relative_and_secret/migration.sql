-- The path attribute of a Kiln::File is the path relative to the project
-- workspace (its path property), never where the server keeps the file.
UPDATE "resource" SET "attributes" = jsonb_set("attributes", '{path}', to_jsonb(coalesce("properties"->>'path', "physical_id")))
 WHERE "type" = 'Kiln::File' AND jsonb_typeof("attributes"->'path') = 'string' AND coalesce("properties"->>'path', "physical_id") IS NOT NULL;

-- An attribute made from a secret is secret: the digest and the size of a
-- file whose properties hold a secret join the secret forms of its row,
-- which every read masks (lib/resources/secrets.ts).
UPDATE "resource" SET "secret_forms" = ARRAY(SELECT DISTINCT f FROM unnest("secret_forms" || ARRAY["attributes"->>'sha256', "attributes"->>'size']) AS f WHERE f IS NOT NULL)
 WHERE "type" = 'Kiln::File' AND cardinality("secret_forms") > 0 AND "attributes"->>'sha256' IS NOT NULL;
