SELECT j.*, false AS created FROM __SCHEMA__.jobs_all j WHERE j.id = %(id)s
