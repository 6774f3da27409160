/** Templates to start a new stack from (OS::Heat::TestResource only: they run anywhere, and take the time they say). */
export interface Example {
  id: string
  title: string
  source: string
}

const chain = `heat_template_version: 2021-04-16
description: A small chain; each resource waits for the one before.

parameters:
  wait:
    type: number
    default: 1
    description: seconds each resource takes

resources:
  network:
    type: OS::Heat::TestResource
    properties:
      value: net
      action_wait_secs: { create: { get_param: wait }, update: { get_param: wait } }
  subnet:
    type: OS::Heat::TestResource
    properties:
      value: { get_attr: [network, output] }
      action_wait_secs: { create: { get_param: wait }, update: { get_param: wait } }
  server:
    type: OS::Heat::TestResource
    properties:
      value: { get_attr: [subnet, output] }
      action_wait_secs: { create: { get_param: wait }, update: { get_param: wait } }

outputs:
  server_value:
    value: { get_attr: [server, output] }
`

const web = `heat_template_version: 2021-04-16
description: A web tier - a network, a database, three servers behind a load balancer.

parameters:
  wait:
    type: number
    default: 2
    description: seconds each resource takes

resources:
  network:
    type: OS::Heat::TestResource
    properties:
      value: net
      action_wait_secs: { create: { get_param: wait }, update: { get_param: wait } }
  database:
    type: OS::Heat::TestResource
    properties:
      value: { get_attr: [network, output] }
      action_wait_secs: { create: { get_param: wait }, update: { get_param: wait } }
  web-1:
    type: OS::Heat::TestResource
    properties:
      value: { list_join: ['-', [web, { get_attr: [database, output] }, '1']] }
      action_wait_secs: { create: { get_param: wait }, update: { get_param: wait } }
  web-2:
    type: OS::Heat::TestResource
    properties:
      value: { list_join: ['-', [web, { get_attr: [database, output] }, '2']] }
      action_wait_secs: { create: { get_param: wait }, update: { get_param: wait } }
  web-3:
    type: OS::Heat::TestResource
    properties:
      value: { list_join: ['-', [web, { get_attr: [database, output] }, '3']] }
      action_wait_secs: { create: { get_param: wait }, update: { get_param: wait } }
  balancer:
    type: OS::Heat::TestResource
    depends_on: [web-1, web-2, web-3]
    properties:
      value: lb
      action_wait_secs: { create: { get_param: wait }, update: { get_param: wait } }

outputs:
  balancer:
    value: { get_attr: [balancer, output] }
`

const replace = `heat_template_version: 2021-04-16
description: Change "generation" and submit again - subnet is replaced (create before delete), the rest updated in place.

parameters:
  generation:
    type: string
    default: g1

resources:
  network:
    type: OS::Heat::TestResource
    properties:
      value: net
      action_wait_secs: { create: 1, update: 1 }
  subnet:
    type: OS::Heat::TestResource
    properties:
      value: { get_attr: [network, output] }
      update_replace_value: { get_param: generation }
      action_wait_secs: { create: 1, update: 1 }
  server:
    type: OS::Heat::TestResource
    properties:
      value: { get_attr: [subnet, output] }
      action_wait_secs: { create: 1, update: 1 }
`

export const EXAMPLES: Example[] = [
  { id: 'chain', title: 'A chain of three', source: chain },
  { id: 'web', title: 'A web tier', source: web },
  { id: 'replace', title: 'A replacement', source: replace },
]
