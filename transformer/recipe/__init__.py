"""The back-translation / self-training recipe behind `transformer-recipe` (`make train-bt`, `make train-st`).

Stages, each in its own folder under PARENT (default outputs/train_bt or outputs/train_st):
  bt  1. reverse/    an en->fr model (+experiment=multi30k_cpu_enfr); with warm_start=true a model of both directions
                     (data.both_directions), from whose weights the final models start (trainer.init_from)
      2. synthetic/  the monolingual English (Multi30k Task 2 captions) translated by it: a fr->en corpus of
                     synthetic French and real English (transformer-backtranslate)
      3. final/      fr->en (+experiment=multi30k_cpu_fren_bt: make train's recipe with dropout 0.1) on Multi30k
         final2/     plus the synthetic pairs (by default untagged at weight 0.25: one synthetic pair per real one,
                     the best on val of those measured), with tatoeba=W Tatoeba's train split as a third corpus;
                     `finals` models share final_minutes (bt: 58.5), final K with trainer.seed=K; bt's finals=auto:
                     two, or one where reverse/ trained slowly (fewer than ENSEMBLE_STEPS steps for each of two
                     finals at its speed)
         finetune/   with finals=1, final/ fine-tuned on Multi30k alone (+experiment=multi30k_cpu_fren,
                     trainer.init_from) for finetune_minutes (0 by default, chosen on val: none)
      4. average     with average=N, the last N checkpoints of each last training run (transformer-average; none
                     by default: the averages did not beat the best checkpoints on val, and doubled the results)
      5. results     beam 5 into PARENT/results.md (transformer-results): the final models, finetune/, their ensemble,
                     and the averaged checkpoints and their ensemble if any on val, then the one val chooses on every
                     test set (test_models=all: every model on every test set)
  st  the same in en->fr: teacher/ is the en->fr model, whose own French for the captions becomes extra en->fr
      pairs (self-training / forward translation, He et al. 2020) for an en->fr final/.

`plan` builds the stages from the settings (`RecipeConfig`), `run` runs them (`run.py`: markers, resume, records);
`backtranslation` is the job of `transformer-backtranslate`. It may import `training` and every layer below it.
"""
