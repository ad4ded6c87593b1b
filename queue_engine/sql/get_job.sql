SELECT j.*, false AS created FROM __SCHEMA__.jobs j WHERE j.id = %(id)s
