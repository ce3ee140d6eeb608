// USPS codes accepted as accident_state, with the names a supplier may send instead: the states,
// DC and the inhabited territories, whose consumers' mobiles the default phone regions accept.
const US_STATES: Readonly<Record<string, string>> = {
  AL: 'Alabama', AK: 'Alaska', AZ: 'Arizona', AR: 'Arkansas', CA: 'California', CO: 'Colorado',
  CT: 'Connecticut', DE: 'Delaware', DC: 'District of Columbia', FL: 'Florida', GA: 'Georgia',
  HI: 'Hawaii', ID: 'Idaho', IL: 'Illinois', IN: 'Indiana', IA: 'Iowa', KS: 'Kansas',
  KY: 'Kentucky', LA: 'Louisiana', ME: 'Maine', MD: 'Maryland', MA: 'Massachusetts',
  MI: 'Michigan', MN: 'Minnesota', MS: 'Mississippi', MO: 'Missouri', MT: 'Montana',
  NE: 'Nebraska', NV: 'Nevada', NH: 'New Hampshire', NJ: 'New Jersey', NM: 'New Mexico',
  NY: 'New York', NC: 'North Carolina', ND: 'North Dakota', OH: 'Ohio', OK: 'Oklahoma',
  OR: 'Oregon', PA: 'Pennsylvania', PR: 'Puerto Rico', RI: 'Rhode Island', SC: 'South Carolina',
  SD: 'South Dakota', TN: 'Tennessee', TX: 'Texas', UT: 'Utah', VT: 'Vermont', VA: 'Virginia',
  WA: 'Washington', WV: 'West Virginia', WI: 'Wisconsin', WY: 'Wyoming',
  VI: 'Virgin Islands', GU: 'Guam', AS: 'American Samoa', MP: 'Northern Mariana Islands',
};

/** Other names in common use. */
const ALSO_NAMED: Readonly<Record<string, string>> = { 'us virgin islands': 'VI', 'u.s. virgin islands': 'VI' };

export const US_STATE_CODES = Object.keys(US_STATES);

/** Every name taken for a code, lower-case, one space between words. */
export const US_STATE_NAMES: readonly string[] = [...Object.values(US_STATES).map((name) => name.toLowerCase()), ...Object.keys(ALSO_NAMED)];

const BY_NAME = new Map([...Object.entries(US_STATES).map(([code, name]) => [name.toLowerCase(), code] as const), ...Object.entries(ALSO_NAMED)]);

/**
 * The USPS code for a code in any case or a full state name (spaces folded); undefined if neither.
 * "Any case" is ASCII's: Unicode's case mappings would make `ıd` (a dotless i) Idaho and a Kelvin
 * sign a K, which the published pattern refuses, and no state is spelt with them.
 */
export function toStateCode(value: string): string | undefined {
  const folded = value.replace(/\s+/g, ' ');
  if (!/^[\x20-\x7e]*$/.test(folded)) return undefined;
  const upper = folded.toUpperCase();
  if (upper in US_STATES) return upper;
  return BY_NAME.get(folded.toLowerCase());
}
