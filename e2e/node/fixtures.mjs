// Shared by the fake upstream and the tests.

// What the fake upstream answers for the model of a route that passes.
export const GOOD_CONTENT = '{"sentiment":"positive","summary":"Fast delivery and great food."}';
// What it answers for the model of a route that never passes.
export const BAD_CONTENT = 'Sure! The sentiment is positive, I think.';
