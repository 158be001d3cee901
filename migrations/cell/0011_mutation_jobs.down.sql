DROP TABLE mutation_jobs;
